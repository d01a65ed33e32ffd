// Package http is Suanli's HTTP boundary: the JSON API under /v1 (with its
// OpenAPI document), /healthz and /metrics on the server side (the web
// console at / is package console, mounted on Server.Mux by cmd/suanli);
// and Client, the Go client that the CLI and the agent use, which
// implements the same suanli service interfaces. The mapping
// between error codes and HTTP statuses lives here and nowhere else.
//
// It must not hold business rules: handlers decode, call a service, encode.
package http
