// Package console is Suanli's web console: the pages a renter or provider
// uses in a browser instead of the CLI. It owns
//
//   - the console's routes (offers at /, offer detail and quote, create
//     with its volume picker, instances, instance detail, volumes, billing
//     with budgets, hosts with payouts, account with SSH keys and the IP
//     allowlist, the advisor's tools, the audit log, the forward market's
//     windows search and booking form, bookings with cancel, and each
//     machine's calendar for its provider, sign-in), mounted on the API
//     server's mux by cmd/suanli;
//   - browser sessions: an API key (or temporary token) is exchanged at
//     sign-in for a random session id kept in server memory with idle and
//     absolute expiry; the cookie carries only that id (HttpOnly,
//     SameSite=Strict, Secure over TLS), never the key;
//   - CSRF protection: every form carries a token tied to the session (the
//     sign-in form, a signed double-submit token), checked before anything
//     changes;
//   - the HTML templates, CSS and JavaScript, embedded in the binary and
//     served under a strict Content-Security-Policy (no inline script or
//     style, no third-party origin);
//   - presentation: the SVG charts (spend by day, shares by project, tag
//     and instance, budget bars, a machine's calendar by day) drawn on the
//     server from the control plane's reports, in suanli.Money integer
//     arithmetic; quotes, budgets, invoices and earnings are the
//     control plane's own (Quote, FindBudgets, Invoice, Earnings), and
//     the advice is package advisor's (EstimateVRAM, AdviseCPUOrGPU,
//     RentVsBuy, Compare), called directly with the market's offers.
//
// It calls the control plane's services with the signed-in caller's
// suanli.Principal in the context, exactly as the JSON API does, so every
// ownership and scope rule applies unchanged. It must not hold business
// rules of its own (placement, billing, listing validation belong to the
// services), must not write to the store directly, and must not show an
// error other than a suanli.Error's message (anything else is "internal
// error" with a request id, logged once).
//
// Pages are server-rendered and readable with JavaScript off; the small
// script only adds live refresh, log tailing and confirmation dialogs.
// Forms that change something post with the session's CSRF token, and the
// destructive ones (destroy, delete a budget or a volume, remove a key or a
// network) ask first: in a dialog, or, without JavaScript, on a
// confirmation page. The advisor's forms are GET: advice changes nothing.
// Every POST (each form, refused or not, and sign-in) is recorded in the
// control plane's audit log as the API's mutations are, with the detail
// "web console".
package console
