package client

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestOptionsDefaults(t *testing.T) {
	o := Options{}.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if o.Timeout != 5*time.Second || o.AttemptTimeout != 5*time.Second/3 || o.WriteRetryWindow != MaxWriteRetryWindow || o.NoRetry {
		t.Fatalf("defaults: %+v", o)
	}
	if tr, ok := o.HTTP.Transport.(*http.Transport); !ok || tr.MaxIdleConnsPerHost != 256 || tr.IdleConnTimeout != time.Minute {
		t.Fatalf("default HTTP transport %#v", o.HTTP.Transport)
	}
	// A short Timeout still leaves each attempt 500 ms.
	if o := (Options{Timeout: time.Second}).EnsureDefaults(); o.AttemptTimeout != 500*time.Millisecond {
		t.Fatalf("attempt timeout %v, want 500ms", o.AttemptTimeout)
	}
	// A window longer than the maximum is lowered to it, a shorter kept.
	if o := (Options{WriteRetryWindow: time.Hour}).EnsureDefaults(); o.WriteRetryWindow != MaxWriteRetryWindow {
		t.Fatalf("window %v, want %v", o.WriteRetryWindow, MaxWriteRetryWindow)
	}
	hc := &http.Client{}
	if o := (Options{WriteRetryWindow: time.Second, HTTP: hc}).EnsureDefaults(); o.WriteRetryWindow != time.Second || o.HTTP != hc {
		t.Fatalf("set fields changed: %+v", o)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"negative timeout", Options{Timeout: -time.Second}, "Timeout -1s: want more than 0"},
		{"negative attempt timeout", Options{AttemptTimeout: -time.Millisecond}, "AttemptTimeout -1ms"},
		{"negative write retry window", Options{WriteRetryWindow: -time.Second}, "WriteRetryWindow -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.EnsureDefaults().Validate()
			if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "cairn: ") {
				t.Fatalf("Validate: %v, want ErrInvalidOptions mentioning %q", err, tc.want)
			}
			if _, err := New([]string{"http://127.0.0.1:1"}, tc.opts); !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("New: %v, want ErrInvalidOptions", err)
			}
		})
	}
	if err := (Options{HTTP: nil, Timeout: time.Second, AttemptTimeout: time.Second, WriteRetryWindow: time.Second}).Validate(); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("unfilled HTTP: %v", err)
	}
}
