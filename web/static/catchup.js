// catchup.js — the focused session's catch-up: from a focus to its
// `replayed` (protocol.md §5.6), the hub sends what the journal holds,
// compacted. Two things wait on it:
//
//   - the history read of the session (transcript.js loadOlder): the run
//     the socket replays is not read over HTTP as well, event by event;
//   - the text of the transcript: rendering a long answer on every frame
//     of a replay lays it out again and again before it is whole, so text
//     is rendered at most once every holdMs while the catch-up arrives,
//     and at once when it is in.

export class CatchUp {
  // opts: waitMs, how long done() waits at most (a catch-up that never
  // ends, e.g. the socket is down, must not block the history read);
  // holdMs, the most text is held back; onHoldEnd(), called when held
  // text may be rendered (schedule a frame); now, setTimer, clearTimer for
  // tests.
  constructor(opts = {}) {
    this.waitMs = opts.waitMs ?? 3000;
    this.holdMs = opts.holdMs ?? 250;
    this.onHoldEnd = opts.onHoldEnd || (() => {});
    this.now = opts.now || (() => performance.now());
    this.setTimer = opts.setTimer || ((fn, ms) => setTimeout(fn, ms));
    this.clearTimer = opts.clearTimer || ((t) => clearTimeout(t));
    this.sid = null;
    this.active = false;
    this.shown = 0; // when held text was last let through
    this.holdTimer = null;
    this.waitTimer = null;
    this.settle = () => {};
    this.promise = Promise.resolve();
  }

  // start begins the catch-up of a newly focused session (null: none),
  // ending the previous one.
  start(sid) {
    this.finish();
    this.sid = sid || null;
    this.active = !!this.sid;
    if (!this.active) return;
    this.shown = this.now();
    this.promise = new Promise((resolve) => (this.settle = resolve));
    this.waitTimer = this.setTimer(() => {
      this.waitTimer = null;
      this.settle();
    }, this.waitMs);
  }

  // end: the session's `replayed` came.
  end(sid) {
    if (sid === this.sid) this.finish();
  }

  finish() {
    this.active = false;
    if (this.waitTimer !== null) this.clearTimer(this.waitTimer);
    if (this.holdTimer !== null) this.clearTimer(this.holdTimer);
    this.waitTimer = this.holdTimer = null;
    this.settle();
  }

  // done returns a promise that settles when sid's catch-up is in (or has
  // taken waitMs); for a session not catching up, one already settled.
  done(sid) {
    return this.active && sid === this.sid ? this.promise : Promise.resolve();
  }

  // hold reports whether sid's text should wait for a later frame: its
  // catch-up is arriving and text was let through less than holdMs ago.
  // Holding arms a call of onHoldEnd for when it lapses.
  hold(sid) {
    if (!this.active || sid !== this.sid) return false;
    const wait = this.shown + this.holdMs - this.now();
    if (wait <= 0) {
      this.shown = this.now();
      return false;
    }
    if (this.holdTimer === null) {
      this.holdTimer = this.setTimer(() => {
        this.holdTimer = null;
        this.onHoldEnd();
      }, wait);
    }
    return true;
  }
}
