// Package checker decides whether a recorded history is correct:
// linearizability per key of a register with compare-and-set (porcupine),
// acknowledged writes lost after healing, writes applied twice (a retry
// under the same request id applied again, or a compare-and-set evaluated
// again), and replicas that diverged.
package checker
