package model

import "strconv"

// MisconceptionKinds are the kinds of message a class's misconception
// summary names, in the order it names them (docs/exercise.md,
// "Predictions"): the faults the lesson is about first, a matching reply
// last. Every DeliveryKind is in it once.
var MisconceptionKinds = [NumDeliveryKinds]DeliveryKind{
	KindStaleReply, KindDuplicate, KindContradictory, KindWrongCallID,
	KindMalformedJSON, KindWrongShape, KindDeadline, KindLateReply,
	KindStaleDeadline, KindMatchingReply,
}

// MisconceptionChart is the class's predictions as bars, one per kind of
// message with a prediction: what the console draws so that a teacher sees
// which fault the class gets wrong.
type MisconceptionChart struct {
	Bars []MisconceptionBar
	// Max is the most predictions any bar has: the scale every bar's length
	// is drawn against, so bars compare.
	Max int
}

// MisconceptionBar is one kind of message: its right and wrong predictions.
type MisconceptionBar struct {
	Kind         DeliveryKind
	Phrase       string // "a stale reply"
	Made         int
	Right, Wrong int
	// Said counts each word predicted, by Prediction: the page lists them
	// with Expectation's sentences.
	Said [NumPredictions]int
	// Text is the bar in words, for a screen reader and for anyone who
	// cannot tell the bar's two parts apart: "a stale reply: 2 right, 5
	// wrong, of 7 predictions".
	Text string
}

// Misconceptions turns a class's tally into its chart, bars in
// MisconceptionKinds's order.
func Misconceptions(t PredictionTally) MisconceptionChart {
	c := MisconceptionChart{Bars: []MisconceptionBar{}}
	for _, k := range MisconceptionKinds {
		kt := t.ByKind[k]
		if kt.Made == 0 {
			continue
		}
		b := MisconceptionBar{
			Kind: k, Phrase: k.Phrase(), Made: kt.Made, Right: kt.Right, Wrong: kt.Made - kt.Right, Said: kt.Said,
			Text: k.Phrase() + ": " + strconv.Itoa(kt.Right) + " right, " + strconv.Itoa(kt.Made-kt.Right) + " wrong, of " + predictions(kt.Made),
		}
		c.Max = max(c.Max, kt.Made)
		c.Bars = append(c.Bars, b)
	}
	return c
}

func predictions(n int) string {
	if n == 1 {
		return "1 prediction"
	}
	return strconv.Itoa(n) + " predictions"
}
