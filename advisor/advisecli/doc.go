// Package advisecli is the command-line face of package advisor: the
// `advise` (vram, cpu-or-gpu, rent-vs-buy), `compare` and `catalog`
// (import, ls) commands, which cmd/suanli mounts with Commands.
//
// It owns the imported catalog file ($SUANLI_HOME/catalog.json) and the
// human output (aligned tables, --json for scripts). It reads the wall
// clock only to date an import and the age of compared prices, and reaches
// the market only through the suanli.OfferService the caller supplies;
// the advice itself is computed by package advisor.
package advisecli
