package jsclient

import (
	"errors"
	"fmt"
	"math"

	"github.com/dop251/goja"

	"github.com/toolcall-lab/lab/model"
)

// A call value's identity for the checker's search (model.CallKeyer): its
// JSON, written by the engine's own JSON.stringify under the call budget
// and the result cap, as view's is. A value whose JSON would not tell it
// apart from another is refused: a function, a symbol, undefined, a
// number JSON writes as null, an object that is not a plain object or an
// array (a Map writes as {}), a cycle.

// callKey writes call's value as JSON.
func (in *instance) callKey(call int) ([]byte, error) {
	c, err := in.handle(call)
	if err != nil {
		return nil, err
	}
	var out string
	err = in.guard("writing the call as JSON", func() error {
		rt := in.rt
		objectProto := rt.Get("Object").ToObject(rt).Get("prototype")
		arrayProto := rt.Get("Array").ToObject(rt).Get("prototype")
		size, capBytes := 0, in.p.budget.Result
		refuse := func(what string) {
			panic(&CallError{Kind: BadResult, Message: "The call value holds " + what + ", which JSON does not write faithfully."})
		}
		replacer := rt.ToValue(func(fc goja.FunctionCall) goja.Value {
			key, val := fc.Argument(0), fc.Argument(1)
			size += len(key.String()) + 8
			switch {
			case goja.IsUndefined(val):
				refuse("undefined")
			case goja.IsString(val):
				size += len(val.String())
			case goja.IsNumber(val):
				if f := val.ToFloat(); math.IsNaN(f) || math.IsInf(f, 0) {
					refuse("a number that is not finite")
				}
			}
			if size > capBytes {
				panic(&CallError{Kind: TooLarge, Message: fmt.Sprintf("The call value's JSON is longer than %d KiB.", capBytes>>10)})
			}
			if obj, ok := val.(*goja.Object); ok {
				if _, fn := goja.AssertFunction(obj); fn {
					refuse("a function")
				}
				if p := obj.Prototype(); p != nil && p != objectProto && p != arrayProto {
					refuse("an object of a class (" + obj.ClassName() + ")")
				}
			} else if _, ok := val.(*goja.Symbol); ok {
				refuse("a symbol")
			}
			return val
		})
		s, err := in.stringify(goja.Undefined(), c, replacer)
		if err != nil {
			var exc *goja.Exception
			if errors.As(err, &exc) {
				return &CallError{Kind: BadResult, Message: "The call value cannot be written as JSON: " + in.thrown(exc.Value()) + "."}
			}
			return err
		}
		if s == nil || goja.IsUndefined(s) {
			return &CallError{Kind: BadResult, Message: "The call value has no JSON."}
		}
		out = s.String()
		return nil
	})
	return []byte(out), err
}

// CallKey is the call value's JSON, asked of the sandbox (model.CallKeyer).
func (c *client) CallKey(call model.ClientCall) (string, error) {
	id, err := c.ref(call)
	if err != nil {
		return "", err
	}
	resp, err := c.s.roundTrip(request{Op: opKey, Inst: c.inst, Call: id}, c.s.budget.PerCall)
	if err == nil {
		err = resp.callErr()
	}
	if err != nil {
		return "", err
	}
	return string(resp.JSON), nil
}
