package auth

import (
	"net/http"
	"strings"
)

// Required is the role a request needs: the route table. A path or
// method it does not name needs admin (deny by default).
func Required(method, path string) Role {
	read := method == http.MethodGet || method == http.MethodHead
	write := method == http.MethodPut || method == http.MethodPost || method == http.MethodDelete
	switch {
	case path == "/metrics" || path == "/v0/status" || path == "/v1/status" || path == "/v1/cluster":
		if read {
			return RoleNone
		}
		return RoleAdmin
	case path == "/v0/entity" || path == "/v1/kv" || strings.HasPrefix(path, "/v1/kv/"):
		switch {
		case read:
			return RoleRead
		case write:
			return RoleWrite
		}
		return RoleAdmin
	case strings.HasPrefix(path, "/v1/index/"):
		if read {
			return RoleRead // secondary-index queries read objects' keys and terms
		}
		return RoleAdmin
	}
	// /v1/admin/* (backups included), /debug/pprof/*, the fault hook, and
	// anything else.
	return RoleAdmin
}
