package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/cairn-db/cairn/internal/kv"
)

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("ETag")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorBody{Error: code, Message: msg})
}

func badRequest(w http.ResponseWriter, msg string) {
	writeError(w, http.StatusBadRequest, "bad_request", msg)
}

// writeBackendError maps a coordinator error to a status code.
func writeBackendError(w http.ResponseWriter, log *slog.Logger, err error) {
	switch {
	case errors.Is(err, kv.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", "key not found")
	case errors.Is(err, kv.ErrPreconditionFailed):
		writeError(w, http.StatusPreconditionFailed, "precondition_failed", "the condition on the current version did not hold; nothing was written")
	case errors.Is(err, kv.ErrRequestIDReused):
		writeError(w, http.StatusConflict, "request_id_reused", "the Cairn-Request-Id names an earlier, different write (another key, operation, value or condition); nothing was written")
	case errors.Is(err, kv.ErrAckTimeout):
		writeError(w, http.StatusGatewayTimeout, "ack_timeout", err.Error())
	case errors.Is(err, kv.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusGatewayTimeout, "timeout", "the request deadline passed before the operation completed (a write may still commit)")
	case errors.Is(err, kv.ErrNoLeader):
		// This node is cut off from the shard's leader (or the shard
		// has none): another node may reach it. A write's outcome is
		// unknown, as with a timeout; its retry under the same
		// Cairn-Request-Id applies it at most once.
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "no_leader", err.Error()+" (a write may still commit)")
	case errors.Is(err, kv.ErrShardOverloaded):
		// One shard is busy; the others are served. Retry-After: the
		// queue drains within the request deadline or answers it.
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "shard_overloaded", err.Error())
	case errors.Is(err, kv.ErrOverloaded):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "overloaded", err.Error())
	case errors.Is(err, kv.ErrWrongShard):
		// Two nodes' shard maps disagree (a descriptor changed); routing
		// settles, so the client retries.
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "wrong_shard", err.Error())
	case errors.Is(err, kv.ErrStopped):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "stopping", err.Error())
	case errors.Is(err, kv.ErrDiskFull):
		writeError(w, http.StatusInsufficientStorage, kv.DiskFull, err.Error()+"; nothing was written (reads and deletes still work)")
	case errors.Is(err, kv.ErrQuotaExceeded):
		writeError(w, http.StatusInsufficientStorage, kv.QuotaExceeded, err.Error()+"; nothing was written (reads and deletes still work)")
	case errors.Is(err, kv.ErrInvalidArgument):
		badRequest(w, err.Error())
	case errors.Is(err, context.Canceled):
		writeError(w, 499, "canceled", "the client went away")
	default:
		log.Error("internal error", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

// protocolCodes name the statuses internal/http1 answers itself.
var protocolCodes = map[int]string{
	http.StatusRequestEntityTooLarge:       "value_too_large",
	http.StatusExpectationFailed:           "expectation_failed",
	http.StatusRequestHeaderFieldsTooLarge: "header_too_large",
	http.StatusNotImplemented:              "not_implemented",
	http.StatusHTTPVersionNotSupported:     "version_not_supported",
	http.StatusInternalServerError:         "internal",
	http.StatusServiceUnavailable:          "overloaded",
}

// WriteProtocolError answers a request the HTTP server could not parse
// (internal/http1's Server.Reject) with the API's JSON error body.
func WriteProtocolError(w http.ResponseWriter, status int, msg string) {
	code, ok := protocolCodes[status]
	if !ok {
		code = "bad_request"
	}
	writeError(w, status, code, msg)
}
