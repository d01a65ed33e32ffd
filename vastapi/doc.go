// Package vastapi serves the Vast.ai REST API (the subset the vastai CLI and
// SDK use, tiers 0–5 of ../shared/reference/vast-api.md) on top of Suanli's
// native services, so that existing Vast tools work against a Suanli
// marketplace by changing one URL (VAST_URL).
//
// It owns translation only: Vast's paths (with and without a trailing
// slash), its request bodies (numbers as JSON strings, MB for RAM, seconds
// for durations, dollars as floats), its field names and units in replies,
// its error shape {"success": false, "error": code, "msg": text}, its
// authentication (Bearer header or api_key query parameter) and its
// permission categories, and the short-lived result URLs that `logs` and
// `execute` answer with. It holds no business rules: every decision (who may
// do what, prices, placement, billing, validation of what is rented) is made
// by control.Service, whose errors are passed on with Vast's field names.
// Money stays suanli.Money inside; it becomes float dollars only when a reply
// is written, and dollars become Money (exactly, at most six decimals) when a
// request is read.
//
// It must not write to the store, keep state beyond the result URLs it has
// handed out, or log query strings (older CLIs put the API key there).
package vastapi
