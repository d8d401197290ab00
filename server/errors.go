package server

import (
	"errors"
	"log/slog"

	"github.com/toolcall-lab/lab/model"
)

// errSessionBusy refuses a command when a session already has too many
// changes waiting to be applied.
var errSessionBusy = errors.New("too many changes are waiting in this session; try again in a moment")

// errUnknownSession refuses an instructor's request for a session the server
// does not hold (instructors never create sessions).
var errUnknownSession = errors.New("unknown session")

// refusal is how a refused change is reported: a reason for metrics and the
// text the client reads.
type refusal struct {
	reason string
	text   string
}

// errCannotSave refuses a change the store could not commit. Its text is
// all the client reads; the cause is logged.
var errCannotSave = errors.New("the lab cannot save right now; try again shortly")

// errTooManySessions refuses a new session past Config.MaxSessions.
var errTooManySessions = errors.New("the lab has reached its limit of stored sessions; ask your instructor")

// errSessionExpiring refuses a connection to a session the janitor is
// deleting at this very moment; a retry gets a fresh session.
var errSessionExpiring = errors.New("this session expired and is being removed; try again shortly")

// classify is the one place that turns an error into what a client reads.
// Errors that are not the client's to see are logged and hidden.
func classify(log *slog.Logger, err error) refusal {
	var fe *frameError
	var le *model.LimitError
	switch {
	case errors.As(err, &fe):
		return refusal{"invalid_frame", err.Error()}
	case errors.As(err, &le):
		return refusal{"limit", err.Error()}
	case errors.Is(err, model.ErrUnknownMessage):
		return refusal{"unknown_message", err.Error()}
	case errors.Is(err, errSessionBusy):
		return refusal{"busy", err.Error()}
	case errors.Is(err, errTooManyFrames):
		return refusal{"rate_limit", err.Error()}
	case errors.Is(err, errCannotSave):
		log.Warn("refusing a change: the store failed", "err", err)
		return refusal{"store", errCannotSave.Error()}
	case errors.Is(err, model.ErrInvalidName):
		return refusal{"invalid_name", err.Error()}
	case errors.Is(err, model.ErrPresetNotApplicable):
		return refusal{"not_applicable", err.Error()}
	case errors.Is(err, errUnknownSession):
		return refusal{"unknown_session", err.Error()}
	}
	log.Error("refusing a change", "err", err)
	return refusal{"internal", "internal error: the change was not applied"}
}
