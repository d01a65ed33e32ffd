package http

import (
	"bytes"
	"net/http/httptest"
)

// DecodeBytes runs the server's strict JSON decoding of a request body.
func DecodeBytes(body []byte, v any) error {
	r := httptest.NewRequest("POST", "/", bytes.NewReader(body))
	return decode(r, v)
}
