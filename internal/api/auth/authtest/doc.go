// Package authtest holds helpers for tests of code that keeps tokens
// with internal/api/auth: an auth.Store in memory.
package authtest
