// Package advisor answers the questions a renter asks before renting, with
// numbers: how much GPU memory a model needs (EstimateVRAM, the Models
// table), whether a many-core CPU offer is the better buy than a GPU
// (AdviseCPUOrGPU), whether to rent or buy (RentVsBuy, TCO), what public
// clouds charge for the same GPU (BuiltinCatalog, ImportSkyPilot, Compare),
// how much CO2 an offer emits (CarbonIntensity, EstimateGCO2PerHour, Green)
// and how far away it is (ParseLocation, LatencyMS).
//
// It owns its reference tables (models, GPUs, public-cloud prices, grid
// carbon intensities, country positions); each row names its source and date.
// The figures are estimates and rules of thumb, and every result says which
// assumptions it made.
//
// The package is pure: no network, no files, no database, no wall clock.
// ImportSkyPilot reads an io.Reader the caller opens; functions that need a
// date take it as an argument. Money is suanli.Money with integer arithmetic;
// floats appear only for physics (bytes of memory, watts, kilometres). The
// CLI commands live in advisor/advisecli; the control plane calls Annotate to fill an offer's carbon_intensity, green
// and latency_ms fields.
package advisor
