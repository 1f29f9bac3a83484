// @platformatic/kafka against Gregor: admin (create, metadata, list groups), produce, consume
// in a group with commits, committed offsets read back. The client implements only Kafka 3.5+
// versions (FindCoordinator v4+, OffsetFetch v8+, Fetch v13+ by topic id, JoinGroup v6+).
// Usage: node platformatic.mjs BOOTSTRAP TOPIC GROUP COUNT; prints one JSON line.
import { Admin, Consumer, Producer, stringDeserializers, stringSerializers } from '@platformatic/kafka'

const [bootstrap, topic, group, countText] = process.argv.slice(2)
const count = Number(countText)
const brokers = [bootstrap]
const admin = new Admin({ clientId: 'e2e-platformatic-admin', bootstrapBrokers: brokers })
await admin.createTopics({ topics: [topic], partitions: 3, replicas: 1 })
let metadata
for (let i = 0; i < 100; i++) {
  metadata = await admin.metadata({ topics: [topic] })
  const t = metadata.topics.get(topic)
  if (t && t.partitions.length === 3 && t.partitions.every(p => p.leader >= 0)) break
  await new Promise(r => setTimeout(r, 100))
}
const producer = new Producer({ clientId: 'e2e-platformatic-producer', bootstrapBrokers: brokers, serializers: stringSerializers })
const messages = []
for (let i = 0; i < count; i++) messages.push({ topic, key: `k${i}`, value: `v${i}`, partition: i % 3 })
await producer.send({ messages })
await producer.close()

const consumer = new Consumer({ groupId: group, clientId: 'e2e-platformatic-consumer', bootstrapBrokers: brokers, deserializers: stringDeserializers })
const stream = await consumer.consume({ autocommit: false, topics: [topic], mode: 'earliest', sessionTimeout: 10000, heartbeatInterval: 500 })
const seen = new Set()
for await (const m of stream) {
  seen.add(m.value)
  await m.commit()
  if (seen.size === count) break
}
await stream.close()
await consumer.close(true)
const groups = await admin.listGroups()
const offsets = await admin.listConsumerGroupOffsets({ groups: [group] })
const committed = {}
for (const g of offsets) for (const t of g.topics) for (const p of t.partitions) committed[`${t.name}-${p.partitionIndex}`] = Number(p.committedOffset)
await admin.close()
console.log(JSON.stringify({ consumed: [...seen].sort(), groups: [...groups.keys()], committed }))
