// Package lease is a machine-checked model of raftlock's lease protocol:
// a pure state machine of clients, sessions, keepalives, leaders and leader
// changes, lock-delays, the token counter, operator actions and clock
// rates, at the level of the design; and an exhaustive breadth-first
// checker of every interleaving within stated bounds, which prints a
// counterexample as a numbered schedule.
package lease
