package http

import (
	"net/http"

	"github.com/suanli/suanli"
)

var codeStatus = map[string]int{
	suanli.EINVALID:         http.StatusBadRequest,
	suanli.ENOTFOUND:        http.StatusNotFound,
	suanli.ECONFLICT:        http.StatusConflict,
	suanli.EUNAUTHORIZED:    http.StatusUnauthorized,
	suanli.EFORBIDDEN:       http.StatusForbidden,
	suanli.EPAYMENTREQUIRED: http.StatusPaymentRequired,
	suanli.EUNAVAILABLE:     http.StatusServiceUnavailable,
	suanli.ERATELIMITED:     http.StatusTooManyRequests,
	suanli.EINTERNAL:        http.StatusInternalServerError,
}

// StatusOf returns the HTTP status for an error code.
func StatusOf(code string) int {
	if s, ok := codeStatus[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// codeOf returns the error code for an HTTP status (for replies that carry
// no JSON error, such as a proxy's).
func codeOf(status int) string {
	for c, s := range codeStatus {
		if s == status {
			return c
		}
	}
	if status >= 500 {
		return suanli.EUNAVAILABLE
	}
	return suanli.EINVALID
}

// ErrorBody is the JSON shape of every error reply.
type ErrorBody struct {
	Error     suanli.Error `json:"error"`
	RequestID string       `json:"request_id,omitempty"`
}
