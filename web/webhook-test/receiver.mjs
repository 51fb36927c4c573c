// A webhook receiver that verifies every request with the official
// Standard Webhooks package (standardwebhooks 1.1.1, pinned in
// package-lock.json). webhook/node_test.go starts it with the secret in
// WEBHOOK_SECRET; it prints {"port":N} once listening on 127.0.0.1, then
// one JSON line per request: {"id","ok","type","error"}. A verified
// request is answered 204, any other 400.
import http from "node:http";
import { Webhook } from "standardwebhooks";

const wh = new Webhook(process.env.WEBHOOK_SECRET);

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    const line = { id: req.headers["webhook-id"] || "", ok: false };
    try {
      const msg = wh.verify(body, req.headers);
      line.ok = true;
      line.type = msg.type;
      line.run_id = msg.data && msg.data.run_id;
    } catch (err) {
      line.error = String(err && err.message);
    }
    process.stdout.write(JSON.stringify(line) + "\n");
    res.writeHead(line.ok ? 204 : 400);
    res.end();
  });
});

server.listen(0, "127.0.0.1", () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + "\n");
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
