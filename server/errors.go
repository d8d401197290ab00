package server

import (
	"errors"
	"log/slog"

	"github.com/toolcall-lab/lab/model"
)

// errSessionBusy refuses a command when a session already has too many
// changes waiting to be applied.
var errSessionBusy = errors.New("too many changes are waiting in this session; try again in a moment")

// errCannotSave refuses a change the store could not commit. Its text is
// all the client reads; the cause is logged.
var errCannotSave = errors.New("the lab cannot save right now; try again shortly")

// errTooManySessions refuses a new session past Config.MaxSessions.
var errTooManySessions = errors.New("the lab has reached its limit of stored sessions; ask your instructor")

// errSessionExpiring refuses a connection to a session the janitor is
// deleting at this very moment; a retry gets a fresh session.
var errSessionExpiring = errors.New("this session expired and is being removed; try again shortly")

// clientMessage is the one place that turns an error into what a client
// reads. Errors that are not the client's to see are logged and hidden.
func clientMessage(log *slog.Logger, err error) string {
	var fe *frameError
	var le *model.LimitError
	switch {
	case errors.As(err, &fe), errors.As(err, &le),
		errors.Is(err, model.ErrUnknownMessage), errors.Is(err, errSessionBusy):
		return err.Error()
	case errors.Is(err, errCannotSave):
		log.Warn("refusing a change: the store failed", "err", err)
		return errCannotSave.Error()
	}
	log.Error("refusing a change", "err", err)
	return "internal error: the change was not applied"
}
