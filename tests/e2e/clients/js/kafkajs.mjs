// kafkajs (Kafka 2.x versions, negotiated through ApiVersions) against Gregor: admin
// (create, metadata, list and describe groups, offsets), idempotent produce, consume in a
// group with commits, delete the topic. Usage: node kafkajs.mjs BOOTSTRAP TOPIC GROUP COUNT.
import kafkajs from 'kafkajs'

const { Kafka, logLevel } = kafkajs
const [bootstrap, topic, group, countText] = process.argv.slice(2)
const count = Number(countText)
const kafka = new Kafka({ clientId: 'e2e-kafkajs', brokers: [bootstrap], logLevel: logLevel.ERROR })
const admin = kafka.admin()
await admin.connect()
await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true })
const metadata = await admin.fetchTopicMetadata({ topics: [topic] })
const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
await producer.connect()
const messages = []
for (let i = 0; i < count; i++) messages.push({ key: `k${i}`, value: `v${i}`, partition: i % 3 })
await producer.send({ topic, messages, acks: -1 })
await producer.disconnect()

const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000, heartbeatInterval: 500 })
await consumer.connect()
await consumer.subscribe({ topic, fromBeginning: true })
const seen = new Set()
await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error(`consumed ${seen.size} of ${count}`)), 60000)
  consumer.run({
    autoCommit: true,
    autoCommitThreshold: 1,
    eachMessage: async ({ message }) => {
      seen.add(message.value.toString())
      if (seen.size === count) { clearTimeout(timer); resolve() }
    },
  }).catch(reject)
})
await consumer.commitOffsets([])
await consumer.disconnect()
const groups = (await admin.listGroups()).groups.map(g => g.groupId)
const described = await admin.describeGroups([group])
const offsets = await admin.fetchOffsets({ groupId: group, topics: [topic] })
const committed = {}
for (const t of offsets) for (const p of t.partitions) committed[`${t.topic}-${p.partition}`] = Number(p.offset)
await admin.deleteTopics({ topics: [topic] })
await admin.disconnect()
console.log(JSON.stringify({
  partitions: metadata.topics[0].partitions.length,
  consumed: [...seen].sort(),
  groups,
  state: described.groups[0].state,
  committed,
}))
