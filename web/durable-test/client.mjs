// Reads a stream with the official Durable Streams client and prints what
// it read as JSON: node client.mjs <whole|tail|produce> <url> [token]
//   whole:   a catch-up read (live: false) of every item until up to date;
//   tail:    an SSE read from the start that follows the stream until the
//            server closes it;
//   produce: creates a JSON stream, appends 200 items through an
//            IdempotentProducer (batched, pipelined), closes it, and
//            reads it back whole.
import { DurableStream, IdempotentProducer, stream } from "@durable-streams/client"

const [mode, url, token] = process.argv.slice(2)
const headers = token ? { Authorization: `Bearer ${token}` } : {}

const items = []
let offset = ""
let closed = false
if (mode === "whole") {
  const res = await stream({ url, headers, live: false })
  items.push(...(await res.json()))
  offset = res.offset
  closed = res.streamClosed
} else if (mode === "tail") {
  const res = await stream({ url, headers, live: "sse", offset: "-1" })
  let batches = 0
  await new Promise((resolve, reject) => {
    res.subscribeJson(async (batch) => {
      batches++
      items.push(...batch.items)
      offset = batch.offset
      if (batch.streamClosed) {
        closed = true
        resolve()
      }
    })
    res.closed.then(resolve, reject)
  })
  closed = closed || res.streamClosed
  process.stderr.write(`batches: ${batches}\n`)
} else if (mode === "produce") {
  const handle = await DurableStream.create({ url, headers, contentType: "application/json", ttlSeconds: 3600 })
  const errors = []
  const producer = new IdempotentProducer(handle, "writer-1", { autoClaim: true, onError: (e) => errors.push(String(e)) })
  for (let i = 0; i < 200; i++) producer.append(JSON.stringify({ i }))
  await producer.flush()
  await producer.close()
  if (errors.length > 0) {
    console.error(errors.join("\n"))
    process.exit(1)
  }
  const res = await handle.stream({ live: false })
  items.push(...(await res.json()))
  offset = res.offset
  closed = res.streamClosed
} else {
  console.error(`unknown mode ${mode}`)
  process.exit(2)
}
process.stdout.write(JSON.stringify({ items, offset, closed }))
