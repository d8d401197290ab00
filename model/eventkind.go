package model

import "fmt"

// Event kind names: the one vocabulary the store, the exports, the
// instructor's timeline and the frames use for what happened. They are
// stored, so they never change; a new kind adds a name.
const (
	KindStarted           = "started"
	KindQueued            = "queued"
	KindDelivered         = "delivered"
	KindRenamed           = "renamed"
	KindInjected          = "injected"
	KindInjectedDelivered = "injected-delivered"
	KindCodeSubmitted     = "code-submitted"
	KindCaseAdded         = "case-added"
	KindCaseRemoved       = "case-removed"
	KindPracticeDrawn     = "practice-drawn"
)

// KindName is the name of e's kind. An injection delivered at once has a
// name of its own, since it is both a queueing and a delivery.
func (e Event) KindName() string {
	switch e.Kind {
	case RunStarted:
		return KindStarted
	case MessageQueued:
		return KindQueued
	case MessageDelivered:
		return KindDelivered
	case Renamed:
		return KindRenamed
	case MessageInjected:
		if e.Deliver {
			return KindInjectedDelivered
		}
		return KindInjected
	case CodeSubmitted:
		return KindCodeSubmitted
	case CaseAdded:
		return KindCaseAdded
	case CaseRemoved:
		return KindCaseRemoved
	case PracticeDrawn:
		return KindPracticeDrawn
	}
	return fmt.Sprintf("unknown(%d)", e.Kind)
}

// ParseKindName is KindName's inverse: the kind, and whether an injection
// was delivered at once.
func ParseKindName(name string) (kind EventKind, deliver bool, ok bool) {
	switch name {
	case KindStarted:
		return RunStarted, false, true
	case KindQueued:
		return MessageQueued, false, true
	case KindDelivered:
		return MessageDelivered, false, true
	case KindRenamed:
		return Renamed, false, true
	case KindInjected:
		return MessageInjected, false, true
	case KindInjectedDelivered:
		return MessageInjected, true, true
	case KindCodeSubmitted:
		return CodeSubmitted, false, true
	case KindCaseAdded:
		return CaseAdded, false, true
	case KindCaseRemoved:
		return CaseRemoved, false, true
	case KindPracticeDrawn:
		return PracticeDrawn, false, true
	}
	return 0, false, false
}
