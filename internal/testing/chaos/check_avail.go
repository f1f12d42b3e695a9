package chaos

// Availability: where the class expects the cluster to serve (a quorum of
// the voters a correct cluster would have is up and connected; the last
// fault has healed; a stopped cluster was started again), a fresh client's
// probe must be granted within its deadline.
func (c *checker) checkProbes() {
	for _, p := range c.h.Probes {
		c.r.Probes++
		if p.Done == 0 || p.Done > p.Deadline {
			c.fail(CheckAvailability, p.Lock, "%s: no grant through %s within %s (%s)", p.What, p.Node, durationMS(p.Deadline-p.Start), p.Err)
			continue
		}
		if p.Resume {
			c.r.ResumeMillis = max(c.r.ResumeMillis, int((p.Done-p.Start)/1e6))
		}
	}
}
