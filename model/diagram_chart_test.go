package model

import (
	"reflect"
	"testing"
)

func TestMisconceptionKindsCoverEveryKindOnce(t *testing.T) {
	t.Parallel()
	seen := map[DeliveryKind]bool{}
	for _, k := range MisconceptionKinds {
		if seen[k] || k >= numDeliveryKinds {
			t.Fatalf("kind %s twice or unknown", k)
		}
		seen[k] = true
	}
}

func TestMisconceptions(t *testing.T) {
	t.Parallel()
	receipt := func(k DeliveryKind, p Prediction, right bool) Receipt {
		return Receipt{Message: 1, Kind: k, Predicted: p, Right: right}
	}
	for _, tc := range []struct {
		name     string
		receipts []Receipt
		want     MisconceptionChart
	}{
		{"no predictions: no bars", []Receipt{{Message: 1, Kind: KindStaleReply}}, MisconceptionChart{Bars: []MisconceptionBar{}}},
		{"bars in the summary's order, scaled by the largest",
			[]Receipt{
				receipt(KindMatchingReply, PredictAccepted, true),
				receipt(KindStaleReply, PredictAccepted, false), receipt(KindStaleReply, PredictAccepted, false), receipt(KindStaleReply, PredictIgnored, true),
			},
			MisconceptionChart{Max: 3, Bars: []MisconceptionBar{
				{Kind: KindStaleReply, Phrase: "a stale reply", Made: 3, Right: 1, Wrong: 2, Said: [NumPredictions]int{PredictAccepted: 2, PredictIgnored: 1},
					Text: "a stale reply: 1 right, 2 wrong, of 3 predictions"},
				{Kind: KindMatchingReply, Phrase: "a matching reply", Made: 1, Right: 1, Said: [NumPredictions]int{PredictAccepted: 1},
					Text: "a matching reply: 1 right, 0 wrong, of 1 prediction"},
			}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Misconceptions(TallyPredictions(tc.receipts)); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
