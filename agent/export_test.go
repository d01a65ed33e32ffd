package agent

// Internal helpers exposed to the external tests in package agent_test.
var (
	ParseCPUModel   = parseCPUModel
	ParseMemTotalMB = parseMemTotalMB
)
