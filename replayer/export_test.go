package replayer

// HoldReconcile takes a reconcile slot as an API reconcile of a viewer (or
// an operator) does, until release: a reconcile held in progress.
func HoldReconcile(r *Replayer, viewer bool) (release func(), err error) {
	return r.reconcileSlot(viewer)
}
