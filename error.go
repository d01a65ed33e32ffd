package suanli

import (
	"errors"
	"fmt"
)

// Error codes. Each maps to one HTTP status in package http, and nowhere else.
const (
	EINVALID         = "invalid"          // the request is malformed; the message names the field and the fix
	ENOTFOUND        = "not_found"        // no such object, or it belongs to another tenant
	ECONFLICT        = "conflict"         // the object's state forbids it now (GPUs taken, already destroyed)
	EUNAUTHORIZED    = "unauthorized"     // no valid credential
	EFORBIDDEN       = "forbidden"        // the credential lacks the scope or role
	EPAYMENTREQUIRED = "payment_required" // the balance or budget does not cover it
	EUNAVAILABLE     = "unavailable"      // try again later (shutting down, dependency down)
	ERATELIMITED     = "rate_limited"     // too many requests or failed logins from here; RetryAfterS says when to retry
	EINTERNAL        = "internal"         // a bug or an I/O failure; logged with a request id
)

// Error is the error every service returns when a person should read it.
// Message names the thing and the fix: "offer 42: asks 4 GPUs, host has 2 free".
// Field, when set, is the request field at fault (for 400s).
// RetryAfterS, for ERATELIMITED, is how many seconds to wait.
type Error struct {
	Code        string `json:"code"`
	Message     string `json:"message"`
	Field       string `json:"field,omitempty"`
	RetryAfterS int    `json:"retry_after_s,omitempty"`
}

// Error implements the error interface.
func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldErrorf returns an EINVALID *Error that names the field at fault.
func FieldErrorf(field, format string, args ...any) *Error {
	return &Error{Code: EINVALID, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL for
// any other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the message of the first *Error in err's chain, or
// "internal error" for any other error: internal details are never shown.
func ErrorMessage(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
