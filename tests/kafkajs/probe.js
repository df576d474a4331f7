// kafkajs-probe drives a Kafka-compatible broker with kafkajs (admin,
// producer, consumer, transactions) and prints one line per check:
// `ok NAME`, or `FAIL NAME: REASON`.
//
//   node probe.js [--records N] [--log LEVEL] BOOTSTRAP TOPIC
//
// kafkajs picks for each request the highest version that it and the
// broker's ApiVersions answer share; it knows no flexible version (KIP-482),
// so everything goes out in the old encodings (Metadata up to v6, Produce v7,
// Fetch v11, JoinGroup v5, OffsetCommit v5, EndTxn v1…).
//
// TOPIC names everything the probe creates: the topic itself (3 partitions,
// retention.ms=3600000), the consumer group TOPIC-group, the transactions'
// topic TOPIC-txn (1 partition), the transactional id TOPIC-txn, the group
// TOPIC-txn-group whose offsets a transaction commits and the groups
// TOPIC-txn-rc and TOPIC-txn-ru of the read_committed and read_uncommitted
// readers. The checks run in order and each has its own deadline
// (CHECK_TIMEOUT_MS; a call still pending then is abandoned); a failed check
// is reported and the run goes on, so one broker bug shows as one FAIL line.
// Records are placed by hand (record i goes to partition i%3, so its offset
// is i/3) and carry timestamp base+i s, so every expected value is exact.
//
// kafkajs's log goes to stderr as JSON lines at --log (nothing, error, warn,
// info, debug; default warn). Exit status: 0 when every check passed, 1 when
// one failed, 2 on bad arguments. tests/e2e/test_kafkajs.py installs and
// runs it (kafkajs from NODE_PATH, the install in .kafgres/kafkajs).
'use strict'

const net = require('net')
const {
  Kafka,
  AssignerProtocol,
  CompressionTypes,
  ConfigResourceTypes,
  ConfigSource,
  Partitioners,
  logLevel,
} = require('kafkajs')

const PARTITION_COUNT = 3
const RETENTION_MS = '3600000'
const CLIENT_ID = 'kafgres-kafkajs-probe'
// Every check, waits included, ends within this; the work inside it gets a
// second less (deadline()), so that it can say what it was waiting for.
const CHECK_TIMEOUT_MS = 20000
// The assigner kafkajs's group consumers use unless told otherwise.
const DEFAULT_ASSIGNER = 'RoundRobinAssigner'
// What the group consumer commits with every offset.
const COMMIT_METADATA = 'kafkajs-probe'
// Records per transaction.
const TXN_RECORDS = 4

const LOG_LEVELS = {
  nothing: logLevel.NOTHING,
  error: logLevel.ERROR,
  warn: logLevel.WARN,
  info: logLevel.INFO,
  debug: logLevel.DEBUG,
}

function usage() {
  process.stderr.write('usage: node probe.js [--records N] [--log LEVEL] BOOTSTRAP TOPIC\n' +
    '  --records N   records to produce (half in each send); at least 6 (default 30)\n' +
    '  --log LEVEL   kafkajs log on stderr: nothing, error, warn, info, debug (default warn)\n')
  process.exit(2)
}

function parseArgs(argv) {
  const opts = { records: 30, log: 'warn', positional: [] }
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--records' && i + 1 < argv.length) opts.records = Number(argv[++i])
    else if (argv[i] === '--log' && i + 1 < argv.length) opts.log = argv[++i]
    else if (argv[i].startsWith('-')) usage()
    else opts.positional.push(argv[i])
  }
  if (opts.positional.length !== 2 || !Number.isInteger(opts.records) ||
      opts.records < 2 * PARTITION_COUNT || !(opts.log in LOG_LEVELS)) {
    usage()
  }
  return opts
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

function expect(cond, message) {
  if (!cond) throw new Error(message)
}

const json = v => JSON.stringify(v, (_, x) => (Buffer.isBuffer(x) ? x.toString() : x))

class Probe {
  constructor(opts) {
    this.bootstrap = opts.positional[0]
    this.topic = opts.positional[1]
    this.group = `${this.topic}-group`
    this.txnTopic = `${this.topic}-txn`
    this.txnId = `${this.topic}-txn`
    this.txnGroup = `${this.topic}-txn-group`
    this.readerGroups = { committed: `${this.topic}-txn-rc`, uncommitted: `${this.topic}-txn-ru` }
    this.records = opts.records
    // Whole seconds ten minutes ago: inside any timestamp bound a broker applies.
    this.baseMs = (Math.floor(Date.now() / 1000) - 600) * 1000
    this.failed = 0
    this.kafka = new Kafka({
      clientId: CLIENT_ID,
      brokers: [this.bootstrap],
      connectionTimeout: 5000,
      requestTimeout: 10000,
      // Bounded retries everywhere, so that a call ends within a check's deadline.
      retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 1000 },
      logLevel: LOG_LEVELS[opts.log],
      logCreator: () => ({ namespace, label, log }) => {
        process.stderr.write(`[kafkajs] ${json({ level: label, namespace, ...log })}\n`)
      },
    })
    this.admin = this.kafka.admin()
  }

  // check runs fn with its own deadline and prints its verdict.
  async check(name, fn) {
    let timer
    const deadlineMs = Date.now() + CHECK_TIMEOUT_MS - 1000
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(
        `did not finish within ${CHECK_TIMEOUT_MS / 1000}s (a kafkajs call did not return)`)), CHECK_TIMEOUT_MS)
    })
    try {
      await Promise.race([fn(deadlineMs), timeout])
      process.stdout.write(`ok ${name}\n`)
      return true
    } catch (e) {
      this.failed++
      const reason = `${e.name && e.name !== 'Error' ? e.name + ': ' : ''}${e.message}` +
        (e.type ? ` (${e.type})` : '') + (e.errors ? ` ${json(e.errors)}` : '')
      process.stdout.write(`FAIL ${name}: ${reason.replace(/\n/g, ' ')}\n`)
      return false
    } finally {
      clearTimeout(timer)
    }
  }

  async run() {
    await this.check('cluster', () => this.checkCluster())
    if (!(await this.check('create-topic', d => this.checkCreateTopic(d)))) {
      return // nothing below makes sense without the topic
    }
    await this.check('create-topic-again', () => this.checkCreateTopicAgain())
    await this.check('describe-topic-configs', () => this.checkDescribeTopicConfigs())
    const half = Math.floor(this.records / 2)
    await this.check('produce-gzip-idempotent', () => this.checkProduce(half))
    await this.check('fetch-topic-offsets', () => this.checkTopicOffsets())

    const member = new GroupMember(this)
    const consumed = await this.check('consume-group', async d => {
      await member.start()
      await member.consume(d, 0, this.records)
    })
    await this.check('commit', () => member.commit(this.records))
    await this.check('describe-group-stable', () => this.checkDescribeGroupStable())
    await this.check('list-groups', () => this.checkListGroups())
    await this.check('fetch-offsets', () => this.checkFetchOffsets(this.records, COMMIT_METADATA))
    await this.check('describe-group-empty', async d => {
      await member.stop() // leaves the group
      await this.waitGroupEmpty(d, this.group)
    })
    if (consumed) {
      await this.check('group-resume', d => this.checkGroupResume(d))
    }

    if (await this.check('txn-commit', d => this.checkTxnCommit(d))) {
      if (await this.check('txn-abort', () => this.checkTxnAbort())) {
        await this.check('txn-read-committed', d => this.checkTxnRead(d, false))
        await this.check('txn-read-uncommitted', d => this.checkTxnRead(d, true))
      }
      await this.check('txn-offsets', d => this.checkTxnOffsets(d))
    }
    await this.check('delete-groups', d => this.checkDeleteGroups(d))
    await this.check('delete-topics', d => this.checkDeleteTopics(d))
  }

  // ------------------------------------------------------------------------
  // Cluster and topics

  async checkCluster() {
    const [host, port] = [this.bootstrap.slice(0, this.bootstrap.lastIndexOf(':')),
      Number(this.bootstrap.slice(this.bootstrap.lastIndexOf(':') + 1))]
    expect(net.isIP(host) && Number.isInteger(port), `bootstrap ${this.bootstrap} is not IP:PORT`)
    await this.admin.connect()
    const { brokers, controller, clusterId } = await this.admin.describeCluster()
    expect(brokers.length === 1, `brokers ${json(brokers)}, want exactly one`)
    const b = brokers[0]
    expect(b.host === host && b.port === port, `broker endpoint ${b.host}:${b.port}, want ${this.bootstrap}`)
    expect(controller === b.nodeId, `controller ${controller}, want the one broker ${b.nodeId}`)
    expect(typeof clusterId === 'string' && clusterId !== '', `cluster id ${json(clusterId)}`)
  }

  async checkCreateTopic(deadlineMs) {
    const created = await this.admin.createTopics({
      topics: [{
        topic: this.topic,
        numPartitions: PARTITION_COUNT,
        replicationFactor: 1,
        configEntries: [{ name: 'retention.ms', value: RETENTION_MS }],
      }],
      waitForLeaders: true,
      timeout: 10000,
    })
    expect(created === true, `createTopics answered ${created}, want true (created)`)
    await this.waitTopic(deadlineMs, this.topic, PARTITION_COUNT)
  }

  // waitTopic polls Metadata until topic has partitions 0..n-1, each led by
  // the one broker with itself as the only replica.
  async waitTopic(deadlineMs, topic, n) {
    const { brokers } = await this.admin.describeCluster()
    const node = brokers[0].nodeId
    let last = 'no answer'
    for (;;) {
      try {
        const { topics } = await this.admin.fetchTopicMetadata({ topics: [topic] })
        expect(topics.length === 1 && topics[0].name === topic, `topics ${json(topics)}`)
        const parts = [...topics[0].partitions].sort((a, b) => a.partitionId - b.partitionId)
        expect(parts.length === n, `${parts.length} partitions, want ${n}`)
        parts.forEach((p, i) => {
          expect(p.partitionId === i && p.partitionErrorCode === 0 && p.leader === node &&
            json(p.replicas) === json([node]) && json(p.isr) === json([node]),
          `partition ${json(p)}, want the one broker ${node} as leader and only replica`)
        })
        return
      } catch (e) {
        last = e.message
      }
      if (Date.now() > deadlineMs) throw new Error(`topic ${topic} not ready: ${last}`)
      await sleep(200)
    }
  }

  async checkCreateTopicAgain() {
    // kafkajs answers false for TOPIC_ALREADY_EXISTS and throws on any other error.
    const created = await this.admin.createTopics({
      topics: [{ topic: this.topic, numPartitions: PARTITION_COUNT, replicationFactor: 1 }],
      timeout: 10000,
    })
    expect(created === false, `createTopics answered ${created}, want false (TOPIC_ALREADY_EXISTS)`)
  }

  async checkDescribeTopicConfigs() {
    const { resources } = await this.admin.describeConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: this.topic, configNames: ['retention.ms', 'cleanup.policy'] }],
      includeSynonyms: false,
    })
    expect(resources.length === 1 && resources[0].resourceName === this.topic && resources[0].errorCode === 0,
      `resources ${json(resources)}`)
    const want = {
      'retention.ms': [RETENTION_MS, ConfigSource.TOPIC_CONFIG],
      'cleanup.policy': ['delete', ConfigSource.DEFAULT_CONFIG],
    }
    for (const e of resources[0].configEntries) {
      const w = want[e.configName]
      expect(w, `config ${e.configName} answered, not asked for`)
      expect(e.configValue === w[0] && e.configSource === w[1],
        `${e.configName}=${e.configValue} source ${e.configSource}, want ${w[0]} source ${w[1]}`)
      delete want[e.configName]
    }
    expect(Object.keys(want).length === 0, `configs missing from the answer: ${Object.keys(want)}`)
  }

  // ------------------------------------------------------------------------
  // Producing and consuming

  message(i, partition) {
    return {
      key: key(i),
      value: value(i),
      partition,
      headers: { i: String(i) },
      timestamp: String(this.baseMs + i * 1000),
    }
  }

  // checkRecord says what is wrong with m (from eachMessage), which should be
  // record i at partition/offset.
  checkRecord(topic, partition, m, i, wantTopic, wantPartition, wantOffset) {
    expect(topic === wantTopic && partition === wantPartition && m.offset === String(wantOffset),
      `record ${i} at ${topic}[${partition}]@${m.offset}, want ${wantTopic}[${wantPartition}]@${wantOffset}`)
    expect(m.key && m.key.toString() === key(i) && m.value && m.value.toString() === value(i),
      `record ${i}: key ${m.key} or value differs`)
    expect(m.timestamp === String(this.baseMs + i * 1000),
      `record ${i}: timestamp ${m.timestamp}, want ${this.baseMs + i * 1000}`)
    expect(Object.keys(m.headers).length === 1, `record ${i}: headers ${json(m.headers)}, want only i`)
  }

  // produce sends records [from, to) in one send and checks each
  // partition's base offset.
  async produce(producer, from, to) {
    const messages = []
    for (let i = from; i < to; i++) messages.push(this.message(i, i % PARTITION_COUNT))
    const meta = await producer.send({ topic: this.topic, acks: -1, compression: CompressionTypes.GZIP, messages })
    expect(meta.length === Math.min(PARTITION_COUNT, to - from), `record metadata ${json(meta)}, want one per partition`)
    for (const m of meta) {
      // The first of [from, to) in this partition is record from + (partition - from) mod 3.
      const first = from + (((m.partition - from) % PARTITION_COUNT) + PARTITION_COUNT) % PARTITION_COUNT
      expect(m.topicName === this.topic && m.errorCode === 0 && m.baseOffset === String(Math.floor(first / PARTITION_COUNT)),
        `partition ${m.partition}: ${json(m)}, want base offset ${Math.floor(first / PARTITION_COUNT)}`)
    }
  }

  // newProducer: idempotent (so one request in flight), the default
  // partitioner (every record here names its partition anyway).
  newProducer(extra = {}) {
    return this.kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      createPartitioner: Partitioners.DefaultPartitioner,
      // Bounded, unlike the idempotent producer's default (kafkajs warns that
      // this "may invalidate EoS guarantees": a record given up on is a
      // failed check here, not a gap).
      retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 1000 },
      ...extra,
    })
  }

  // checkProduce: records [0, half) and [half, records) in two sends of one
  // idempotent producer (acks=all, gzip).
  async checkProduce(half) {
    const producer = this.newProducer()
    await producer.connect()
    try {
      await this.produce(producer, 0, half)
      await this.produce(producer, half, this.records)
    } finally {
      await producer.disconnect()
    }
  }

  async checkTopicOffsets() {
    const offsets = await this.admin.fetchTopicOffsets(this.topic)
    expect(offsets.length === PARTITION_COUNT, `offsets ${json(offsets)}`)
    for (const o of offsets) {
      const high = String(countBelow(this.records, o.partition))
      expect(o.low === '0' && o.high === high && o.offset === high, `partition ${o.partition}: ${json(o)}, want 0..${high}`)
    }
  }

  // ------------------------------------------------------------------------
  // Groups

  async describeGroup(group) {
    const { groups } = await this.admin.describeGroups([group])
    expect(groups.length === 1 && groups[0].groupId === group, `groups ${json(groups)}`)
    expect(groups[0].errorCode === 0, `group error ${groups[0].errorCode}`)
    return groups[0]
  }

  async checkDescribeGroupStable() {
    const g = await this.describeGroup(this.group)
    expect(g.state === 'Stable' && g.protocolType === 'consumer' && g.protocol === DEFAULT_ASSIGNER && g.members.length === 1,
      `state=${g.state} protocol-type=${g.protocolType} protocol=${g.protocol} members=${g.members.length}, ` +
      `want Stable consumer ${DEFAULT_ASSIGNER} 1`)
    const m = g.members[0]
    expect(m.clientId === CLIENT_ID && m.clientHost !== '' && m.memberId !== '',
      `member id ${m.memberId} client id ${m.clientId} host ${m.clientHost}`)
    const meta = AssignerProtocol.MemberMetadata.decode(m.memberMetadata)
    expect(meta && json(meta.topics) === json([this.topic]), `member subscription ${json(meta)}, want [${this.topic}]`)
    const assignment = AssignerProtocol.MemberAssignment.decode(m.memberAssignment)
    const parts = assignment && assignment.assignment[this.topic]
    expect(parts && Object.keys(assignment.assignment).length === 1 &&
      json([...parts].sort((a, b) => a - b)) === json([0, 1, 2]),
    `assigned ${json(assignment)}, want ${this.topic} [0,1,2]`)
  }

  async checkListGroups() {
    const { groups } = await this.admin.listGroups()
    const g = groups.find(x => x.groupId === this.group)
    expect(g, `${this.group} not among ${groups.length} listed groups`)
    expect(g.protocolType === 'consumer', `listed with protocol type ${g.protocolType}, want consumer`)
  }

  async checkFetchOffsets(upTo, metadata) {
    const offsets = await this.admin.fetchOffsets({ groupId: this.group, topics: [this.topic] })
    expect(offsets.length === 1 && offsets[0].topic === this.topic && offsets[0].partitions.length === PARTITION_COUNT,
      `offsets ${json(offsets)}, want ${PARTITION_COUNT} partitions of ${this.topic}`)
    for (const p of offsets[0].partitions) {
      const want = String(countBelow(upTo, p.partition))
      expect(p.offset === want && p.metadata === metadata,
        `partition ${p.partition}: offset ${p.offset} metadata ${json(p.metadata)}, want ${want} and ${json(metadata)}`)
    }
  }

  async waitGroupEmpty(deadlineMs, group) {
    let last = 'no answer'
    for (;;) {
      try {
        const g = await this.describeGroup(group)
        if (g.state === 'Empty' && g.members.length === 0) return
        last = `state ${g.state} with ${g.members.length} members`
      } catch (e) {
        last = e.message
      }
      if (Date.now() > deadlineMs) throw new Error(`${last}; want Empty after the member left`)
      await sleep(100)
    }
  }

  // checkGroupResume: a new member of the group starts at the committed offsets.
  async checkGroupResume(deadlineMs) {
    const producer = this.newProducer()
    await producer.connect()
    try {
      await this.produce(producer, this.records, this.records + PARTITION_COUNT)
    } finally {
      await producer.disconnect()
    }
    const member = new GroupMember(this)
    try {
      await member.start()
      await member.consume(deadlineMs, this.records, this.records + PARTITION_COUNT)
      await member.commit(this.records + PARTITION_COUNT)
    } finally {
      await member.stop()
    }
  }

  // ------------------------------------------------------------------------
  // Transactions
  //
  // The transactions' topic has one partition and takes TXN_RECORDS records
  // per transaction, each followed by its control record (the commit or
  // abort marker): the records of transaction k are numbers k*TXN_RECORDS+j
  // at offsets k*(TXN_RECORDS+1)+j. Transactions 0, 2 and 3 commit, 1 aborts.

  async txnProducer() {
    const producer = this.newProducer({ transactionalId: this.txnId, transactionTimeout: 30000 })
    await producer.connect()
    return producer
  }

  // sendTxn runs transaction k: its records, offsets to commit with it (if
  // any), then a commit or (abort) an abort.
  async sendTxn(producer, k, offsets, abort) {
    const txn = await producer.transaction()
    try {
      const messages = []
      for (let i = k * TXN_RECORDS; i < (k + 1) * TXN_RECORDS; i++) messages.push(this.message(i, 0))
      const meta = await txn.send({ topic: this.txnTopic, acks: -1, compression: CompressionTypes.GZIP, messages })
      expect(meta.length === 1 && meta[0].partition === 0 && meta[0].errorCode === 0 &&
        meta[0].baseOffset === String(txnOffset(k * TXN_RECORDS)),
      `transaction ${k}: record metadata ${json(meta)}, want base offset ${txnOffset(k * TXN_RECORDS)}`)
      if (offsets) await txn.sendOffsets({ consumerGroupId: this.txnGroup, topics: offsets })
    } catch (e) {
      await txn.abort().catch(() => {})
      throw new Error(`transaction ${k}: ${e.message}`)
    }
    await (abort ? txn.abort() : txn.commit())
    expect(!txn.isActive(), `transaction ${k} still active after the ${abort ? 'abort' : 'commit'}`)
  }

  // checkTxnCommit creates the transactions' topic and commits transaction 0.
  async checkTxnCommit(deadlineMs) {
    const created = await this.admin.createTopics({
      topics: [{ topic: this.txnTopic, numPartitions: 1, replicationFactor: 1 }],
      waitForLeaders: true,
      timeout: 10000,
    })
    expect(created === true, `createTopics ${this.txnTopic} answered ${created}`)
    await this.waitTopic(deadlineMs, this.txnTopic, 1)
    const producer = await this.txnProducer()
    try {
      await this.sendTxn(producer, 0, null, false)
    } finally {
      await producer.disconnect()
    }
  }

  // checkTxnAbort aborts transaction 1 and commits 2, with a new producer
  // (InitProducerId again, for the same transactional id).
  async checkTxnAbort() {
    const producer = await this.txnProducer()
    try {
      await this.sendTxn(producer, TXN_ABORTED, null, true)
      await this.sendTxn(producer, 2, null, false)
    } finally {
      await producer.disconnect()
    }
  }

  // checkTxnRead reads the transactions' topic from the start with a group
  // of its own: read_committed sees exactly transactions 0 and 2,
  // read_uncommitted 0, 1 and 2, in order at their offsets.
  async checkTxnRead(deadlineMs, readUncommitted) {
    const want = []
    for (let i = 0; i < 3 * TXN_RECORDS; i++) {
      if (readUncommitted || Math.floor(i / TXN_RECORDS) !== TXN_ABORTED) want.push(i)
    }
    const group = readUncommitted ? this.readerGroups.uncommitted : this.readerGroups.committed
    const member = new GroupMember(this, { group, topic: this.txnTopic, readUncommitted })
    try {
      await member.start()
      for (let n = 0; n < want.length; n++) {
        const { topic, partition, message } = await member.next(deadlineMs,
          () => `got ${n} of ${want.length} records before the deadline`)
        const i = Number(message.headers.i && message.headers.i.toString())
        expect(i === want[n], `record ${i} at offset ${message.offset} where record ${want[n]} (offset ${txnOffset(want[n])}) was due`)
        this.checkRecord(topic, partition, message, i, this.txnTopic, 0, txnOffset(i))
      }
    } finally {
      await member.stop()
    }
  }

  // checkTxnOffsets commits transaction 3 with offsets for TOPIC-txn-group
  // (AddOffsetsToTxn, TxnOffsetCommit), which OffsetFetch then answers.
  async checkTxnOffsets(deadlineMs) {
    const at = String(3 * (TXN_RECORDS + 1))
    const producer = await this.txnProducer()
    try {
      await this.sendTxn(producer, 3, [{ topic: this.txnTopic, partitions: [{ partition: 0, offset: at }] }], false)
    } finally {
      await producer.disconnect()
    }
    let last = 'no answer'
    for (;;) {
      const offsets = await this.admin.fetchOffsets({ groupId: this.txnGroup, topics: [this.txnTopic] })
      const p = offsets.length === 1 && offsets[0].partitions.find(x => x.partition === 0)
      if (p && p.offset === at) return
      last = json(offsets)
      if (Date.now() > deadlineMs) throw new Error(`group ${this.txnGroup}: committed ${last}, want offset ${at}`)
      await sleep(100)
    }
  }

  // ------------------------------------------------------------------------
  // Deletion

  async checkDeleteGroups(deadlineMs) {
    const groups = [this.group, this.txnGroup, this.readerGroups.committed, this.readerGroups.uncommitted]
    // Every member left before this check.
    for (const g of groups) {
      if (g !== this.txnGroup) await this.waitGroupEmpty(deadlineMs, g)
    }
    const results = await this.admin.deleteGroups(groups)
    expect(results.length === groups.length && results.every(r => r.errorCode === 0),
      `deleteGroups answered ${json(results)}`)
    const listed = (await this.admin.listGroups()).groups.map(g => g.groupId)
    for (const g of groups) {
      expect(!listed.includes(g), `${g} still listed after DeleteGroups`)
    }
    const offsets = await this.admin.fetchOffsets({ groupId: this.group, topics: [this.topic] })
    const left = offsets.flatMap(t => t.partitions).filter(p => p.offset !== '-1')
    expect(left.length === 0, `offsets left after DeleteGroups: ${json(left)}`)
  }

  async checkDeleteTopics(deadlineMs) {
    const all = await this.admin.listTopics()
    const topics = [this.topic, this.txnTopic].filter(t => all.includes(t))
    await this.admin.deleteTopics({ topics, timeout: 10000 })
    for (;;) {
      const left = (await this.admin.listTopics()).filter(t => topics.includes(t))
      if (left.length === 0) return
      if (Date.now() > deadlineMs) throw new Error(`${json(left)} still listed after DeleteTopics`)
      await sleep(100)
    }
  }
}

const TXN_ABORTED = 1

function txnOffset(i) {
  return Math.floor(i / TXN_RECORDS) * (TXN_RECORDS + 1) + (i % TXN_RECORDS)
}

function key(i) {
  return `key-${String(i).padStart(3, '0')}`
}

// value is compressible, so the codec has something to do.
function value(i) {
  return `value-${String(i).padStart(3, '0')};`.repeat(20)
}

// countBelow is how many of records [0, n) partition part holds.
function countBelow(n, part) {
  let c = 0
  for (let i = 0; i < n; i++) if (i % PARTITION_COUNT === part) c++
  return c
}

// GroupMember is one member of a group (the probe's, by default): a
// consumer whose run() hands every record over, committing only when told.
class GroupMember {
  constructor(probe, { group = probe.group, topic = probe.topic, readUncommitted = false } = {}) {
    this.probe = probe
    this.topic = topic
    this.queue = []
    this.waiters = []
    this.errors = []
    this.consumer = probe.kafka.consumer({
      groupId: group,
      readUncommitted,
      sessionTimeout: 10000,
      rebalanceTimeout: 10000,
      heartbeatInterval: 1000,
      maxWaitTimeInMs: 500,
      retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 1000 },
    })
    this.consumer.on(this.consumer.events.CRASH, e => this.errors.push(e.payload.error.message))
  }

  async start() {
    await this.consumer.connect()
    await this.consumer.subscribe({ topics: [this.topic], fromBeginning: true })
    await this.consumer.run({
      autoCommit: false,
      eachMessage: async record => {
        this.queue.push(record)
        this.waiters.splice(0).forEach(wake => wake())
      },
    })
  }

  // next is the next record, waiting for one until deadlineMs.
  async next(deadlineMs, what) {
    while (this.queue.length === 0) {
      const left = deadlineMs - Date.now()
      if (left <= 0) throw new Error(`${what()}; client errors: ${json(this.errors)}`)
      await new Promise(resolve => {
        const timer = setTimeout(resolve, left)
        this.waiters.push(() => { clearTimeout(timer); resolve() })
      })
    }
    return this.queue.shift()
  }

  // consume waits until records [from, to) arrived and checks each one.
  async consume(deadlineMs, from, to) {
    const seen = new Set()
    while (seen.size < to - from) {
      const { topic, partition, message } = await this.next(deadlineMs,
        () => `got ${seen.size} of ${to - from} records before the deadline`)
      const i = Number(message.headers.i && message.headers.i.toString())
      expect(Number.isInteger(i) && i >= from && i < to, `unexpected record at ${partition}/${message.offset}: header i=${message.headers.i}`)
      expect(!seen.has(i), `record ${i} consumed twice`)
      this.probe.checkRecord(topic, partition, message, i, this.topic, i % PARTITION_COUNT, Math.floor(i / PARTITION_COUNT))
      seen.add(i)
    }
  }

  // commit commits [0, upTo) with metadata and checks what the group then holds.
  async commit(upTo) {
    const offsets = []
    for (let part = 0; part < PARTITION_COUNT; part++) {
      offsets.push({ topic: this.topic, partition: part, offset: String(countBelow(upTo, part)), metadata: COMMIT_METADATA })
    }
    await this.consumer.commitOffsets(offsets)
    await this.probe.checkFetchOffsets(upTo, COMMIT_METADATA)
  }

  // stop leaves the group (LeaveGroup) and closes the connections.
  async stop() {
    await this.consumer.disconnect()
  }
}

async function main() {
  const probe = new Probe(parseArgs(process.argv.slice(2)))
  await probe.run()
  await Promise.race([probe.admin.disconnect(), sleep(5000)])
  if (probe.failed > 0) {
    process.stderr.write(`kafkajs-probe: ${probe.failed} check(s) failed\n`)
    process.exit(1)
  }
  process.exit(0)
}

main().catch(e => {
  process.stderr.write(`kafkajs-probe: ${e.stack || e}\n`)
  process.exit(1)
})
