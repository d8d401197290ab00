// receive returns an update whose notice is a getter that never returns.
export function begin(runId, callId) { return { runId, callId }; }
export function receive(call, raw) {
  return {
    call,
    get notice() {
      for (;;) {}
    },
  };
}
export function expire(call) { return { call, notice: "" }; }
export function view(call) { return { runId: call.runId, callId: call.callId, status: "Pending", detail: "" }; }
