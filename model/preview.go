package model

// Preview returns what applying e would leave, without changing the session:
// the notice and the run that is current afterwards. The server stores both
// with the event before it applies it, so that nothing is applied that was
// not stored. An event Apply would refuse is refused here too.
//
// It applies e to a shallow copy whose slices are full (len == cap), so any
// append reallocates and the session's own slices stay untouched. Apply must
// therefore only append to slices and replace fields, never write a slice
// element in place.
func (l *Lab) Preview(e Event) (notice, run string, err error) {
	c := *l
	c.queue = l.queue[:len(l.queue):len(l.queue)]
	c.receipts = l.receipts[:len(l.receipts):len(l.receipts)]
	notice, err = c.Apply(e)
	if err != nil {
		return "", "", err
	}
	return notice, c.call.Key.RunID, nil
}
