package checker

// Kind of a recorded operation on a register.
type Kind string

// Operation kinds.
const (
	Read  Kind = "read"
	Write Kind = "write"
	CAS   Kind = "cas" // compare-and-set: Expected -> Value
)

// Outcome of a recorded operation.
type Outcome string

// Outcomes. Unknown means the client cannot tell whether a write took
// effect (timeout, connection lost): it may have happened at any time after
// its call.
const (
	OK      Outcome = "ok"
	Fail    Outcome = "fail" // definitely not applied (CAS mismatch, 4xx)
	Unknown Outcome = "unknown"
)

// Op is one recorded client operation. Values are strings; "" means absent.
// Writes must use unique values so a value identifies the write.
type Op struct {
	Client   int     `json:"client"`
	Kind     Kind    `json:"kind"`
	Key      string  `json:"key"`
	Value    string  `json:"value,omitempty"`    // written (write, cas) or read (read)
	Expected string  `json:"expected,omitempty"` // cas
	Call     int64   `json:"call"`               // ns since the run started
	Return   int64   `json:"return"`             // ns since the run started
	Outcome  Outcome `json:"outcome"`
	Node     int     `json:"node"`
	// Version is the key's version the node answered: the new one of an
	// acknowledged write or compare-and-set, the one read (0: unknown or
	// absent).
	Version uint64 `json:"version,omitempty"`
	Err     string `json:"err,omitempty"`
}
