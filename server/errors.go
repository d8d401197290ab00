package server

import (
	"errors"
	"log/slog"

	"github.com/toolcall-lab/lab/model"
)

// errSessionBusy refuses a command when a session already has too many
// changes waiting to be applied.
var errSessionBusy = errors.New("too many changes are waiting in this session; try again in a moment")

// clientMessage is the one place that turns an error into what a client
// reads. Errors that are not the client's to see are logged and hidden.
func clientMessage(log *slog.Logger, err error) string {
	var fe *frameError
	var le *model.LimitError
	switch {
	case errors.As(err, &fe), errors.As(err, &le),
		errors.Is(err, model.ErrUnknownMessage), errors.Is(err, errSessionBusy):
		return err.Error()
	}
	log.Error("refusing a change", "err", err)
	return "internal error: the change was not applied"
}
