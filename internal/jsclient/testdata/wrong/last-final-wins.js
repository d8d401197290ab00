// Wrong on purpose: last final wins (a one-place edit of ../correct.js).
const UNRESOLVED_DETAIL =
  "No final reply observed. A matching late reply can still resolve this call.";

export function begin(runId, callId) {
  return { key: { runId, callId }, status: { tag: "Pending" } };
}

function sameKey(a, b) {
  return a.runId === b.runId && a.callId === b.callId;
}

function decode(json) {
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    return { error: "Invalid reply: expected string identifiers and a completed output or rejected reason." };
  }
  const { runId, callId, kind } = json;
  if (typeof runId === "string" && typeof callId === "string") {
    if (kind === "completed" && typeof json.output === "string") {
      return { reply: { key: { runId, callId }, ok: true, text: json.output } };
    }
    if (kind === "rejected" && typeof json.reason === "string") {
      return { reply: { key: { runId, callId }, ok: false, text: json.reason } };
    }
  }
  return { error: "Invalid reply: expected string identifiers and a completed output or rejected reason." };
}

function accept(call, reply) {
  if (!sameKey(call.key, reply.key)) {
    return { call, notice: "Ignored reply: different call identity." };
  }
  const tag = call.status.tag;
  if (false) {
    return { call, notice: "Ignored reply: final outcome already recorded." };
  }
  if (reply.ok) {
    return { call: { ...call, status: { tag: "Completed", text: reply.text } }, notice: "Accepted completion." };
  }
  return { call: { ...call, status: { tag: "Rejected", text: reply.text } }, notice: "Accepted rejection." };
}

export function receive(call, raw) {
  let json;
  try {
    json = JSON.parse(raw);
  } catch (_) {
    return { call, notice: "Invalid JSON: could not parse message." };
  }
  const decoded = decode(json);
  if (decoded.error) {
    return { call, notice: decoded.error };
  }
  return accept(call, decoded.reply);
}

export function expire(call, runId, callId) {
  if (!sameKey(call.key, { runId, callId })) {
    return { call, notice: "Ignored deadline: different call identity." };
  }
  switch (call.status.tag) {
    case "Pending":
      return {
        call: { ...call, status: { tag: "Unresolved" } },
        notice: "Unresolved: deadline observed without a final reply.",
      };
    case "Unresolved":
      return { call, notice: "Still unresolved: no final reply." };
    default:
      return { call, notice: "Ignored deadline: final outcome already recorded." };
  }
}

export function view(call) {
  const s = call.status;
  let detail = "";
  if (s.tag === "Completed" || s.tag === "Rejected") {
    detail = s.text;
  } else if (s.tag === "Unresolved") {
    detail = UNRESOLVED_DETAIL;
  }
  return { runId: call.key.runId, callId: call.key.callId, status: s.tag, detail };
}
