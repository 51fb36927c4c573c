// k6 version of the runhub load test (see loadtest/README.md): TABS tab
// sockets, each watching WATCH sessions and focusing one (switching every
// FOCUS_EVERY seconds), while RUNS simulated runs of TOKENS tokens every
// TOKEN_MS ms are kept going over HTTP. Measures end-to-end latency from
// each event's created_at to its receipt, replay time on focus, and checks
// that no focus ever delivers a duplicate or a gap.
//
//   k6 run -e HUB=127.0.0.1:8080 -e TABS=1000 -e RUNS=200 loadtest/k6/tabs.js
//
// Uses the k6/websockets module (the browser WebSocket API on k6's global
// event loop), not the legacy k6/ws. Only loopback hubs are accepted.
import http from 'k6/http';
import exec from 'k6/execution';
import { check, sleep } from 'k6';
import { WebSocket } from 'k6/websockets';
import { setTimeout, setInterval, clearInterval } from 'k6/timers';
import { Trend, Counter } from 'k6/metrics';

const env = (k, d) => (__ENV[k] === undefined || __ENV[k] === '' ? d : __ENV[k]);
const HUB = env('HUB', '127.0.0.1:8080');
const TABS = parseInt(env('TABS', '100'), 10);
const WATCH = parseInt(env('WATCH', '10'), 10);
const RUNS = parseInt(env('RUNS', '20'), 10);
const SESSIONS = parseInt(env('SESSIONS', String(Math.max(RUNS, WATCH, 1))), 10);
const TOKENS = parseInt(env('TOKENS', '200'), 10);
const TOKEN_MS = parseInt(env('TOKEN_MS', '20'), 10);
const FOCUS_EVERY = parseFloat(env('FOCUS_EVERY', '10')); // seconds; 0 = never
const FOCUS_ALL = env('FOCUS_ALL', '0') === '1'; // one socket per watched session
const DURATION = parseFloat(env('DURATION', '30')); // seconds each tab stays connected
const P99_MS = parseFloat(env('P99_MS', '10'));

// Loopback only: this script must never be pointed at another machine.
const host = HUB.replace(/:\d+$/, '').replace(/^\[|\]$/g, '');
if (!(/^127\.\d+\.\d+\.\d+$/.test(host) || host === 'localhost' || host === '::1')) {
  throw new Error(`HUB=${HUB}: only loopback hubs (127.0.0.0/8, ::1, localhost) may be load-tested`);
}
if (WATCH > SESSIONS || RUNS > SESSIONS) {
  throw new Error('WATCH and RUNS must not exceed SESSIONS');
}
const BASE = `http://${HUB}`;
const WS_URL = `ws://${HUB}/v1/ws`;

// End-to-end latency of live events: receipt time − created_at.
const eventLatency = new Trend('runhub_event_latency', true);
const replayTime = new Trend('runhub_focus_replay_time', true);
const connectTime = new Trend('runhub_connect_time', true);
const liveEvents = new Counter('runhub_live_events');
const replayedEvents = new Counter('runhub_replayed_events');
const statuses = new Counter('runhub_statuses');
const bytesIn = new Counter('runhub_bytes_received');
const dups = new Counter('runhub_duplicates');
const gaps = new Counter('runhub_gaps');
const wsErrors = new Counter('runhub_ws_errors');
const hubErrors = new Counter('runhub_hub_errors');
const runsStarted = new Counter('runhub_runs_started');

const scenarios = {
  tabs: {
    executor: 'per-vu-iterations',
    exec: 'tab',
    vus: TABS,
    iterations: 1,
    maxDuration: `${Math.ceil(DURATION + 60)}s`,
  },
};
if (RUNS > 0) {
  scenarios.runs = {
    executor: 'per-vu-iterations',
    exec: 'runs',
    vus: RUNS,
    iterations: 1,
    startTime: '2s', // after the tabs have begun connecting
    maxDuration: `${Math.ceil(DURATION + 60)}s`,
  };
}

export const options = {
  setupTimeout: '120s',
  scenarios,
  thresholds: {
    runhub_event_latency: [`p(99)<${P99_MS}`],
    runhub_duplicates: ['count==0'],
    runhub_gaps: ['count==0'],
    runhub_ws_errors: ['count==0'],
    runhub_hub_errors: ['count==0'],
    http_req_failed: ['rate<0.01'],
    checks: ['rate>0.99'],
  },
};

const json = { headers: { 'Content-Type': 'application/json' } };

export function setup() {
  const sids = [];
  for (let i = 0; i < SESSIONS; i++) {
    const r = http.post(`${BASE}/v1/sessions`, JSON.stringify({ title: `k6 ${i}` }), json);
    check(r, { 'session created': (x) => x.status === 201 });
    sids.push(r.json('session_id'));
  }
  return { sids };
}

// Per focus epoch, every run must arrive from seq 1, in order, complete up
// to its terminal event before the next run begins.
function newEpoch() {
  return { runs: {}, last: '' };
}

function checkEvent(ep, e) {
  let r = ep.runs[e.run_id];
  if (!r) {
    const prev = ep.runs[ep.last];
    if (prev && !prev.done) gaps.add(1);
    r = ep.runs[e.run_id] = { next: 1, done: false };
    ep.last = e.run_id;
  } else if (e.run_id !== ep.last) {
    dups.add(1);
    return;
  }
  if (r.done || e.seq < r.next) {
    dups.add(1);
    return;
  }
  if (e.seq > r.next) gaps.add(e.seq - r.next);
  r.next = e.seq + 1;
  r.done = e.terminal;
}

// openSocket opens one tab socket that watches `watched` and cycles its
// focus through `focusSet`.
function openSocket(watched, focusSet, switchEvery) {
  const t0 = Date.now();
  const ws = new WebSocket(WS_URL, 'runhub.v1');
  const st = { sid: '', at: 0, replaying: false, ep: newEpoch(), idx: 0 };
  let timer = null;

  const focus = (sid) => {
    st.sid = sid;
    st.at = Date.now();
    st.replaying = true;
    st.ep = newEpoch();
    ws.send(JSON.stringify({ type: 'focus', session_id: sid }));
  };

  ws.addEventListener('open', () => {
    ws.send(JSON.stringify({ type: 'hello', client: 'runhub-k6' }));
  });
  ws.addEventListener('message', (m) => {
    const data = m.data;
    bytesIn.add(data.length);
    for (const line of data.split('\n')) {
      if (line === '') continue;
      const msg = JSON.parse(line);
      switch (msg.type) {
        case 'welcome':
          connectTime.add(Date.now() - t0);
          if (watched.length > 0) ws.send(JSON.stringify({ type: 'watch', sessions: watched }));
          focus(focusSet[0]);
          if (switchEvery > 0 && focusSet.length > 1) {
            timer = setInterval(() => {
              st.idx = (st.idx + 1) % focusSet.length;
              focus(focusSet[st.idx]);
            }, switchEvery * 1000);
          }
          break;
        case 'event': {
          const e = msg.event;
          if (e.session_id !== st.sid) break; // in flight from the previous focus
          checkEvent(st.ep, e);
          if (st.replaying) {
            replayedEvents.add(1);
          } else {
            liveEvents.add(1);
            eventLatency.add(Date.now() - e.created_at * 1000);
          }
          break;
        }
        case 'replayed':
          if (msg.session_id === st.sid && st.replaying) {
            st.replaying = false;
            replayTime.add(Date.now() - st.at);
          }
          break;
        case 'status':
          statuses.add(1);
          break;
        case 'error':
          hubErrors.add(1, { code: msg.code });
          break;
      }
    }
  });
  ws.addEventListener('error', (e) => {
    wsErrors.add(1);
    console.error(`socket error: ${e.error}`);
  });
  return {
    close: () => {
      if (timer !== null) clearInterval(timer);
      ws.close();
    },
  };
}

// tab is one browser tab (with FOCUS_ALL: one socket per watched session).
export function tab(data) {
  const sids = data.sids;
  const S = sids.length;
  const t = exec.scenario.iterationInTest;
  const stride = Math.max(1, Math.floor(S / Math.max(WATCH, 1)));
  const watched = [];
  for (let j = 0; j < WATCH; j++) watched.push(sids[(t + j * stride) % S]);
  const socks = [];
  if (FOCUS_ALL && watched.length > 1) {
    socks.push(openSocket(watched, watched.slice(0, 1), 0));
    for (const sid of watched.slice(1)) socks.push(openSocket([], [sid], 0));
  } else {
    socks.push(openSocket(watched, watched.length > 0 ? watched : [sids[t % S]], FOCUS_EVERY));
  }
  setTimeout(() => socks.forEach((s) => s.close()), DURATION * 1000);
}

// runs keeps one session busy with simulated runs until DURATION is over.
export function runs(data) {
  const slot = exec.scenario.iterationInTest;
  const sid = data.sids[slot];
  const body = JSON.stringify({
    message: 'load test', source: 'k6',
    metadata: { sim: { tokens: TOKENS, token_ms: TOKEN_MS, tools: 0 } },
  });
  const end = Date.now() + DURATION * 1000;
  while (Date.now() < end) {
    const r = http.post(`${BASE}/v1/sessions/${sid}/runs`, body, json);
    if (!check(r, { 'run started': (x) => x.status === 202 })) {
      sleep(1);
      continue;
    }
    runsStarted.add(1);
    const rid = r.json('run_id');
    // Wait for its end (GET /v1/runs/{rid}), then start the next one.
    while (Date.now() < end + 60000) {
      sleep(0.25);
      const s = http.get(`${BASE}/v1/runs/${rid}`, { tags: { name: 'GET /v1/runs/{rid}' } });
      if (s.status === 200 && s.json('terminal_state')) break;
    }
  }
}
