// Tests of static/catchup.js with a fake clock and timers, run by
// `node --test` from TestClientJS.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";

const src = await readFile(new URL("../static/catchup.js", import.meta.url), "utf8");
const { CatchUp } = await import(`data:text/javascript,${encodeURIComponent(src)}`);

// fake is a clock and timers that run when the test moves the clock.
function fake() {
  const f = { t: 1000, timers: new Map(), next: 1 };
  f.now = () => f.t;
  f.setTimer = (fn, ms) => {
    const id = f.next++;
    f.timers.set(id, { at: f.t + ms, fn });
    return id;
  };
  f.clearTimer = (id) => f.timers.delete(id);
  f.advance = (ms) => {
    f.t += ms;
    for (const [id, tm] of [...f.timers].sort((a, b) => a[1].at - b[1].at)) {
      if (tm.at <= f.t && f.timers.has(id)) {
        f.timers.delete(id);
        tm.fn();
      }
    }
  };
  return f;
}

const settled = async (p) => {
  let done = false;
  p.then(() => (done = true));
  for (let i = 0; i < 5; i++) await null;
  return done;
};

test("done waits for the focused session's replayed, and only for it", async () => {
  const f = fake();
  const c = new CatchUp({ now: f.now, setTimer: f.setTimer, clearTimer: f.clearTimer, waitMs: 3000 });
  assert.ok(await settled(c.done("s1")), "nothing focused: nothing to wait for");
  c.start("s1");
  const p = c.done("s1");
  assert.ok(await settled(c.done("s2")), "another session does not wait");
  assert.ok(!(await settled(p)));
  c.end("s2"); // another session's replayed
  assert.ok(!(await settled(p)));
  c.end("s1");
  assert.ok(await settled(p));
  assert.ok(await settled(c.done("s1")), "after its replayed a later read does not wait");
  assert.equal(f.timers.size, 0, "no timer left behind");
});

test("done gives up after waitMs, and a new focus settles the old wait", async () => {
  const f = fake();
  const c = new CatchUp({ now: f.now, setTimer: f.setTimer, clearTimer: f.clearTimer, waitMs: 3000 });
  c.start("s1");
  const p = c.done("s1");
  f.advance(2999);
  assert.ok(!(await settled(p)));
  f.advance(1);
  assert.ok(await settled(p), "a catch-up that never ends does not block the history");
  c.start("s2");
  const q = c.done("s2");
  c.start(null);
  assert.ok(await settled(q));
  assert.equal(f.timers.size, 0);
});

test("hold: text waits while the catch-up arrives, at most holdMs at a time", () => {
  const f = fake();
  let ends = 0;
  const c = new CatchUp({ now: f.now, setTimer: f.setTimer, clearTimer: f.clearTimer, holdMs: 250, onHoldEnd: () => ends++ });
  assert.equal(c.hold("s1"), false, "nothing catching up");
  c.start("s1");
  assert.equal(c.hold("s2"), false, "another session");
  assert.equal(c.hold("s1"), true);
  f.advance(100);
  assert.equal(c.hold("s1"), true);
  assert.equal(f.timers.size, 2, "one hold timer (and the wait), however often asked");
  f.advance(150);
  assert.equal(ends, 1, "the hold's end asks for a frame");
  assert.equal(c.hold("s1"), false, "250 ms: the text shows");
  assert.equal(c.hold("s1"), true, "and is held again for the next 250 ms");
  f.advance(250);
  assert.equal(ends, 2);
  assert.equal(c.hold("s1"), false);
  c.end("s1");
  assert.equal(c.hold("s1"), false, "caught up: nothing is held");
  f.advance(1000);
  assert.equal(ends, 2, "no hold timer outlives the catch-up");
  assert.equal(f.timers.size, 0);
});
