// gen_vectors.mjs writes the golden vectors that package jsjson's tests check
// against: what real JSON.parse and JSON.stringify do.
//
// Regenerate, from the repository root, with node 20 or later:
//
//	node model/jsjson/testdata/gen_vectors.mjs
//
// It overwrites vectors.json and stringify.json next to this file and prints a
// summary. The inputs are fixed or come from a seeded generator, so the output
// only changes when this script (or JSON.parse) does. Check both files in; the
// Go tests read them and need no node.
//
// vectors.json is one array of
//
//	{"input": string, "ok": bool, "kind"?: string, "text"?: string,
//	 "members"?: {key: {"kind": string, "text"?: string}}}
//
// kind is "null", "boolean", "number", "string", "array" or "object"; text is
// given for a top-level string and for string members only. Inputs are kept to
// well-formed strings (no lone surrogate characters), so they are valid UTF-8
// in Go and round-trip through this JSON file. Decoded texts and keys are
// passed through toWellFormed(), which is the U+FFFD substitution jsjson makes
// for lone surrogate escapes; an input whose keys would collide only after that
// substitution is left out, since there the two cannot agree.
//
// stringify.json is one array of {"s": string, "out": JSON.stringify(s)}.

import { writeFileSync } from 'node:fs';

const here = new URL('.', import.meta.url);

// Seeded PRNG (mulberry32) so that regenerating gives the same file.
let seed = 0x6a736a73;
function rand() {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(rand() * a.length)];

const inputs = [];
const add = (...xs) => { for (const x of xs) inputs.push(x); };

// Typical replies and frames, the seeds for the mutations below.
const reply = '{"runId":"run-1","callId":"lookup","kind":"completed","output":"x"}';
const rich = '{"runId":"run-2","callId":"lookup","kind":"rejected","reason":"no \\"such\\" item\\n","meta":{"tries":[1,2.5,-3e2],"ok":true},"n":null,"__proto__":"p"}';
const frame = '{"type":"queueReply","raw":"{\\"runId\\":\\"run-1\\"}","message":7}';
const bases = [reply, rich, frame];
add(...bases);

// Hand-picked cases.
add(
  '', ' ', '\t\n\r ', 'null', 'true', 'false', 'True', 'NULL', 'nul', 'tru', 'fals',
  'nulll', 'truefalse', 'true false', 'null,', 'undefined', 'NaN', '-NaN', 'Infinity',
  '-Infinity', '{}', '[]', '""', '{ }', '[ ]', '" "', '{"":""}', '{"":1,"":2}',
  '[1,2,3]', '[1,,2]', '[,1]', '[1,]', '[', ']', '{', '}', '[}', '{]', '[[]', '[]]',
  '{"a":1,}', '{,}', '{"a"}', '{"a":}', '{"a" 1}', '{"a"::1}', '{"a":1 "b":2}',
  '{"a":1,,"b":2}', '{a:1}', "{'a':1}", '{"a":\'x\'}', '{1:1}', '{null:1}', '{"a":1}}',
  '{"a":1}{', '{"a":1} {"b":2}', '[1] [2]', '1 2', '"a" "b"', '{"a":[1,{"b":[{}]}]}',
  '{"a":{"b":{"c":{}}}}', '[[[[[[[[[[]]]]]]]]]]', '[[[[[[[[[[]]]]]]]]]', '{"a":[}',
  '{"a":{]}', '{"__proto__":{"x":1}}', '{"__proto__":1,"__proto__":"two"}',
  '{"constructor":"c","toString":"t","hasOwnProperty":1}', '{"a":1,"A":2}',
  '{"runId":"a","runid":"b","RunId":"c"}', '{"run\\u0049d":"x"}', '{"\\u0072unId":"y"}',
  '{"k\\"q":"v"}', '{"k\\\\":"v"}', '{"\\/":"/"}', '{"\\u0000":"nul"}', '{"é":"e"}',
  '{"😀":"smile"}', '{"\\ud83d\\ude00":"escaped smile"}', '{"\\ud83d":"lone high"}',
  '{"\\ude00":"lone low"}', '{"a":"\\ud83d\\ud83d\\ude00"}', '{"a":"\\ude00\\ud83d"}',
  '{"a":"\\ud83d\\u0041"}', '{"a":"\\ud83dx"}', '{"a":"\\ud83d\\"}', '{"a":"\\ud83d\\n"}',
  '"\\ud800"', '"\\udbff\\udfff"', '"\\uDBFF\\uDFFF"', '"\\uD83D\\uDE00"', '"\\ud83d\\uDE00"',
  '"\\u00e9"', '"\\u00E9"', '"\\u00"', '"\\u00e"', '"\\u00eg"', '"\\u"', '"\\x41"', '"\\a"',
  '"\\U0041"', '"\\0"', '"\\\'"', '"\\ "', '"\\\n"', '"\\', '"\\"', '"abc', '"abc\\"', 'abc"',
  '"\u0000"', '"\u0001"', '"\u001f"', '"\u007f"', '"\u0080"', '"\u00a0"', '"\u2028\u2029"',
  '"\ufeff"', '"\uffff"', '"\ufffd"', '"😀"', '"\t"', '"\n"', '"\r"', '"\b"', '"\f"',
  '"\\t\\n\\r\\b\\f\\"\\\\\\/"', '"a\\u0000b"', '"<>&\'"', '"\u0085"',
  '\ufeff{}', '{}\ufeff', '\u00a0{}', '{}\u00a0', '\u2028{}', '{}\u2028', '\u000b{}',
  '{}\u000b', '\u000c{}', '{}\u000c', '\u0000{}', '{}\u0000', '\u3000{}', '\u0085{}',
  ' {} ', '\t{}\t', '\n{}\n', '\r{}\r', '\r\n{\r\n"a"\r\n:\r\n1\r\n}\r\n',
  '{ "a" : [ 1 , 2 ] , "b" : { } }', '/**/{}', '{}//', '{"a":1/*c*/}', '#{}',
  '0', '-0', '1', '-1', '01', '-01', '00', '1.5', '1.', '.5', '-.5', '1e5', '1E5', '1e+5',
  '1e-5', '1e', '1e+', '1e-', '1.5e', '+1', '--1', '-', '1x', '0x10', '0b1', '1_000',
  '1e400', '-1e400', '1e-400', '123456789012345678901234567890', '0.1e1', '0e0', '-0e-0',
  '1.0', '1.00000000000000000000001', '9007199254740993', '5e-324', '1.7976931348623157e308',
  '2.5E-3', '0.', '-0.', '0.e1', '1.e1', '1e1.5', '1ee1', '1e++1', '1,', '[1.]', '[-]',
  '[01]', '[0 1]', '{"n":01}', '{"n":-}', '{"n":1.}', '{"n":.1}', '{"n":1e}',
);

// Numbers in three contexts.
const numbers = ['0', '-0', '7', '-7', '10', '0.5', '-0.25', '12.34e5', '1E-2', '1e+0',
  '1e400', '-1e400', '4.9e-324', '1e-999', '00', '01', '-01', '+1', '.1', '1.', '1e', '1e+',
  '-', '--1', '1-', '1.2.3', '1e2e3', 'Infinity', '-Infinity', 'NaN', '0x1f', '1 2', '- 1',
  '1 .5', '0.0000001', '100000000000000000000000', '1e1', '1E1', '-1E+1', '0e-0', '٣', '１'];
for (const n of numbers) add(n, `{"n":${n}}`, `[${n}]`, `{"a":"b","n":${n},"z":true}`);

// String bodies in three contexts: top-level, member value, key.
const bodies = ['', 'x', 'run-1', ' spaced ', '\\"', '\\\\', '\\/', '\\b\\f\\n\\r\\t',
  '\\u0041', '\\u0061\\u0062', '\\u00e9', '\\u00E9', '\\u20ac', '\\u2028', '\\uffff',
  '\\ud83d\\ude00', '\\uD83D\\uDE00', '\\ud83d', '\\ude00', '\\ud83d\\ud83d', '\\ude00\\ud83d',
  '\\ud83d\\ude00\\ude00', '\\udc00\\udc00', '\\udfff\\udbff\\udfff', '\\ud7ff\\udc00', '\\udbff\\ue000', 'x\\ud83dy', '\\u0000', '\\u001F', '\\u007f', 'é', '€', '😀', '\u2028',
  '\u007f', '\\u12', '\\u12g4', '\\uGGGG', '\\U1234', '\\x20', '\\v', '\\f', '\\', 'a\\', '\t', '\n',
  '\u0000', '\u001f', '\\\'', '\\a', '\\%', 'tab\there', 'new\\nline', 'quote"', 'long'.repeat(40)];
for (const b of bodies) add(`"${b}"`, `{"s":"${b}"}`, `{"${b}":"v"}`, `["${b}"]`);

// Duplicate keys.
add('{"a":1,"a":2}', '{"a":"x","a":"y"}', '{"a":"x","a":1}', '{"a":1,"a":"x"}',
  '{"a":"x","a":null}', '{"a":"x","a":{}}', '{"a":{},"a":"x"}', '{"a":[],"a":true}',
  '{"a":"x","b":"y","a":"z"}', '{"a":"x","\\u0061":"y"}', '{"\\u0061":"x","a":"y"}',
  '{"runId":"r1","runId":"r2"}', '{"output":"x","output":1}', '{"a":"1","a":"2","a":"3","a":"4"}',
  '{"\\ud83d\\ude00":"pair","😀":"raw"}', '{"a":{"a":1,"a":2},"a":{"b":1}}',
  '{"\\ud800":1,"\\udbff":2}'); // distinct in JavaScript, one key after U+FFFD substitution: skipped

// Nesting and non-object tops.
for (let d = 1; d <= 6; d++) {
  add('['.repeat(d) + ']'.repeat(d), '['.repeat(d) + ']'.repeat(d - 1),
    '{"a":'.repeat(d) + '1' + '}'.repeat(d), '{"a":'.repeat(d) + '1' + '}'.repeat(d - 1),
    '[{"a":'.repeat(d) + '[]' + '}]'.repeat(d), '{"k":' + '['.repeat(d) + '"s"' + ']'.repeat(d) + '}');
}
for (const d of [100, 1000]) {
  add('['.repeat(d) + ']'.repeat(d), '['.repeat(d), '['.repeat(d) + ']'.repeat(d + 1),
    '{"a":'.repeat(d) + 'null' + '}'.repeat(d), '{"x":' + '[{"y":'.repeat(d) + '0' + '}]'.repeat(d) + ',"z":"done"}');
}
add('[1,"a",true,null,{},[]]', '["a","b"]', '[{"runId":"x"}]', '"just a string"', '42', '-3.5e-7',
  'null ', ' true', '[null]', '[true,false]', '{"a":[1,2,{"b":null}],"c":"d"}');

// Systematic mutations of the typical replies.
const chars = ['"', '\\', ',', ':', '{', '}', '[', ']', ' ', '\t', '\n', '\r', '\u000b', '\u000c',
  '\u00a0', '\ufeff', '\u2028', '\u0000', '\u001f', '\u007f', 'x', '0', '-', '.', 'e', '/', 'é', '😀', "'"];
for (const base of bases) {
  for (let i = 0; i < base.length; i++) {
    add(base.slice(0, i)); // truncation
    if (base === reply || i % 2 === 0) add(base.slice(0, i) + base.slice(i + 1)); // deletion
  }
  for (let i = 0; i <= base.length; i++) {
    add(base.slice(0, i) + chars[i % chars.length] + base.slice(i)); // insertion
  }
  for (let n = 0; n < 80; n++) {
    const i = Math.floor(rand() * base.length);
    add(base.slice(0, i) + pick(chars) + base.slice(i + 1)); // replacement
    const j = Math.floor(rand() * (base.length + 1));
    add(base.slice(0, j) + pick(chars) + pick(chars) + base.slice(j)); // double insertion
  }
}

// Odd whitespace at each token boundary of the reply, one boundary at a time.
const boundaries = [];
{
  let inString = false;
  for (let i = 0; i <= reply.length; i++) {
    if (!inString) boundaries.push(i);
    const c = reply[i];
    if (c === '"') inString = !inString;
  }
}
for (const ws of [' ', '\t', '\n', '\r', '\r\n', ' \t\n\r', '\u000b', '\u000c', '\u00a0', '\ufeff',
  '\u2028', '\u3000', '\u0000', '\u0085']) {
  for (const i of boundaries) add(reply.slice(0, i) + ws + reply.slice(i));
}

// Unique, well-formed inputs only (see the header).
const seen = new Set();
const vectors = [];
let skipped = 0;
const wf = (s) => s.toWellFormed();
function kindOf(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}
for (const input of inputs) {
  if (seen.has(input) || !input.isWellFormed()) continue;
  seen.add(input);
  let v;
  try {
    v = JSON.parse(input);
  } catch (e) {
    if (!(e instanceof SyntaxError)) throw e;
    vectors.push({ input, ok: false });
    continue;
  }
  const vec = { input, ok: true, kind: kindOf(v) };
  if (typeof v === 'string') vec.text = wf(v);
  if (vec.kind === 'object') {
    const members = new Map();
    for (const k of Object.keys(v)) {
      const m = { kind: kindOf(v[k]) };
      if (typeof v[k] === 'string') m.text = wf(v[k]);
      members.set(wf(k), m);
    }
    if (members.size !== Object.keys(v).length) {
      skipped++;
      continue;
    }
    vec.members = Object.fromEntries(members); // CreateDataProperty: "__proto__" stays a key
  }
  vectors.push(vec);
}
writeFileSync(new URL('vectors.json', here), '[\n' + vectors.map((v) => JSON.stringify(v)).join(',\n') + '\n]\n');

// JSON.stringify of strings: every ASCII character alone, plus mixtures.
const strs = [];
for (let c = 0; c < 0x80; c++) strs.push(String.fromCharCode(c), 'a' + String.fromCharCode(c) + 'b');
strs.push('', 'plain', 'é', '€', '😀', '\u0080', '\u009f', '\u00a0', '\u2028', '\u2029', '\ufeff',
  '\ufffd', '\uffff', '<script>&amp;</script>', 'line1\nline2\r\n\ttab', 'quote "x" \\ back',
  '\u0000\u0001\u001e\u001f\u007f', 'Answer for run-1', '{"runId":"run-1"}', 'x'.repeat(100) + '\n',
  'é😀\u2028"\\\b');
const stringify = strs.map((s) => ({ s, out: JSON.stringify(s) }));
writeFileSync(new URL('stringify.json', here), '[\n' + stringify.map((v) => JSON.stringify(v)).join(',\n') + '\n]\n');

const ok = vectors.filter((v) => v.ok).length;
console.log(`vectors.json: ${vectors.length} inputs (${ok} valid, ${vectors.length - ok} invalid; ${skipped} skipped for surrogate key collisions)`);
console.log(`stringify.json: ${stringify.length} strings`);
