// Package advisor answers, with numbers, the questions a renter asks before
// renting:
//
//   - how much GPU memory a model needs: EstimateVRAM over the Models table;
//   - whether a many-core CPU offer does the work cheaper than a GPU:
//     AdviseCPUOrGPU;
//   - whether to rent or buy: RentVsBuy (the rule of thumb as
//     written, then a TCO with the break-even month);
//   - what public clouds charge for the same GPU: BuiltinCatalog,
//     ImportSkyPilot, Compare, RegionSpreads;
//   - how much CO2 an offer emits: CarbonIntensity, EstimateGCO2PerHour,
//     GreenThreshold;
//   - how far away an offer is: ParseLocation, LatencyMS.
//
// The control plane calls Annotate to fill an offer's carbon_intensity,
// green and latency_ms fields, then OfferCO2PerHour for co2_g_per_hour.
//
// It owns its reference tables (models, GPUs, public-cloud list prices, grid
// carbon intensities, country positions, workload rules of thumb); every row
// names its source, and every result lists the assumptions behind it.
//
// It must stay pure: no network, files, database or wall clock. The
// SkyPilot importer reads an io.Reader its caller opened; anything that
// needs a date takes it as an argument. Money is suanli.Money in exact
// integer arithmetic, ratios on money are basis points; floats appear only
// for physics (bytes, watts, kilometres) and never flow back into money
// without an explicit integer conversion. The CLI commands live in
// advisor/advisecli.
package advisor
