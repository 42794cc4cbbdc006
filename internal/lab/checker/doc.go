// Package checker decides whether a recorded history is correct:
// linearizability per key of a register with compare-and-set (porcupine),
// acknowledged writes lost after healing, and replicas that diverged.
package checker
