//! Every guard proven: each condition that carries an invariant, broken on
//! purpose, must make some case line fail.
//!
//! A mutation is a small patch, `mutants/<name>.patch`, that removes or
//! weakens one guard: a condition of the lease or resource SQL, or a
//! decision of the Rust code that the safety argument rests on. The harness
//! ([`harness`]) applies each patch in a scratch copy of the project (never
//! to the reader's files), builds it, and runs the case that should catch
//! it, then the others if that one does not: a mutation no case catches
//! *survives*, and a survivor means a guard that nothing checks.
//!
//! The same table is the book's part "动手把它弄坏": `./run.sh try NAME`
//! shows one patch, asks the reader to predict, runs the breaking case and
//! shows its FAIL lines. Each mutant's transcript is locked as evidence
//! (`evidence/26/try/<name>.snap`), so the book shows a real broken run.
//!
//! Why this file stays whole: the mutation table is one list, in the
//! book's order, which the harness and the exercises both walk.

pub mod harness;
pub mod scratch;

/// One guard, broken on purpose.
#[derive(Debug)]
pub struct Mutation {
    /// The patch's name, `mutants/<name>.patch`.
    pub name: &'static str,
    /// Which book chapter of exercises it belongs to.
    pub group: Group,
    /// What the guard protects, in one line.
    pub guards: &'static str,
    /// The `lab run` arguments of the case that must catch it; for a
    /// guard of the model, `["model"]`: `lab model` (`harness::MODEL`).
    pub killer: &'static [&'static str],
    /// The exercise's question: what will happen? (Chinese, like the book.)
    pub question: &'static str,
}

/// The exercises' chapters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// The acquire statement.
    Acquire,
    /// Renew and release.
    RenewRelease,
    /// The resource's fence (and the publication rule that copies it).
    Fence,
    /// Decisions of the holder's own code.
    Client,
    /// What the lease store's commits wait for, which decides whether a
    /// failover can lose a token (F14).
    Failover,
    /// The chaos run's record and its checker (F15): a judge that cannot
    /// see a failure is a check that cannot fail.
    Chaos,
    /// The lease on etcd: the acquire txn and its token (F16).
    Etcd,
    /// The faults the cases inject (F12's delay on the wire, F13's slow
    /// clock, the partitions of F17–F19 and of the chaos run): a case that
    /// judges the fence under a fault that never happened proves nothing,
    /// so each checks that its fault took hold.
    Faults,
    /// The model checker's own checks (`lab model`): a property that
    /// cannot fail would call every mode safe.
    Model,
    /// The bug zoo's job queue (F20–F28): each check of the claim's token,
    /// and each judgement of whether a claim is alive, put back to the bug
    /// a published queue shipped.
    Queue,
    /// The object store that cannot compare tokens (F29–F34): its
    /// conditional writes, and the claim a holder writes first.
    Object,
}

/// Every mutation, in the book's order.
pub const MUTATIONS: &[Mutation] = &[
    Mutation {
        name: "acquire-while-held",
        group: Group::Acquire,
        guards: "I1: acquire succeeds only on an expired or released row",
        killer: &["F1"],
        question: "获取语句的过期条件换成了 WHERE true。F1 里 holder-b 在 A 的租约有效期内去获取，会拿到什么？",
    },
    Mutation {
        name: "acquire-reentrant-by-name",
        group: Group::Acquire,
        guards: "I1: a crash does not release the lease, not even to a restarted instance of the same name",
        killer: &["F10"],
        question: "获取语句多了一个条件：同名的持有者随时可以重新获取（OR l.holder = EXCLUDED.holder）。F10 里 holder-a 被 SIGKILL 后马上重启，它在租约过期前去获取，会怎样？",
    },
    Mutation {
        name: "acquire-reuses-token",
        group: Group::Acquire,
        guards: "I2: every acquire issues a larger token",
        killer: &["F1"],
        question: "获取时 token 不再加一。A 释放之后 B 获取，B 的 token 是多少？资源端会怎样看待 A 和 B？",
    },
    Mutation {
        name: "acquire-keeps-old-holder",
        group: Group::Acquire,
        guards: "the row names the new holder, so the old one's grant stops matching",
        killer: &["F1"],
        question: "获取成功时 holder 列保留上一任的名字。B 接手之后，一个以 holder-a 名义、带着当前 token 的续租会怎样？",
    },
    Mutation {
        name: "acquire-keeps-old-expiry",
        group: Group::Acquire,
        guards: "a new holding gets a new expires_at, by the database clock",
        killer: &["F1"],
        question: "获取成功时 expires_at 不重新计算，沿用旧值。A 释放后 B 立即获取，此刻租约行处于哪种状态？",
    },
    Mutation {
        name: "renew-ignores-name",
        group: Group::RenewRelease,
        guards: "a grant renews only its own lease",
        killer: &["F1"],
        question: "续租语句不再比较租约名。holder-a 在另一个租约 cleanup-job 上恰好也持有 token=1，它用 report-job 的旧授予续租，会发生什么？",
    },
    Mutation {
        name: "renew-ignores-holder",
        group: Group::RenewRelease,
        guards: "a grant renews only its holder's holding",
        killer: &["F1"],
        question: "续租语句不再比较持有者。以 holder-a 的名义、带着 B 当前的 token 续租，结果如何？",
    },
    Mutation {
        name: "renew-ignores-token",
        group: Group::RenewRelease,
        guards: "I2: one token is one continuous holding; a stale grant renews nothing",
        killer: &["F2"],
        question: "续租语句不再比较 token。holder-a 过期后重新获取得到 token=2，它手里旧的 token=1 授予去续租，会怎样？",
    },
    Mutation {
        name: "renew-after-expiry",
        group: Group::RenewRelease,
        guards: "an expired holding cannot be revived by a renewal",
        killer: &["F2"],
        question: "续租语句去掉了 expires_at > now()。租约已经过期、还没有人接手时，原持有者续租会怎样？",
    },
    Mutation {
        name: "release-ignores-name",
        group: Group::RenewRelease,
        guards: "a grant releases only its own lease",
        killer: &["F1"],
        question: "释放语句不再比较租约名。holder-a 用 report-job 的旧授予释放，cleanup-job 会怎样？",
    },
    Mutation {
        name: "release-ignores-holder",
        group: Group::RenewRelease,
        guards: "a grant releases only its holder's holding",
        killer: &["F1"],
        question: "释放语句不再比较持有者。以 holder-a 的名义、带着 B 当前的 token 释放，B 的租约会怎样？",
    },
    Mutation {
        name: "release-ignores-token",
        group: Group::RenewRelease,
        guards: "a stale grant releases nothing",
        killer: &["F2"],
        question: "释放语句不再比较 token。holder-a 重新获取得到 token=2 后，用旧的 token=1 授予释放，会怎样？",
    },
    Mutation {
        name: "fence-accepts-any-token",
        group: Group::Fence,
        guards: "I3: the resource refuses a token below the largest it has seen",
        killer: &["F4"],
        question: "栅栏的比较换成了永远成立的条件。F4 里暂停的 A 恢复后用 token=1 写入，结果如何？最终 summary 是谁的？",
    },
    Mutation {
        name: "fence-refuses-equal-token",
        group: Group::Fence,
        guards: "one grant may write many times: equal tokens pass",
        killer: &["F2"],
        question: "栅栏的 <= 换成了 <。同一个 token 第二次写入同一作用域，会怎样？",
    },
    Mutation {
        name: "fence-never-advances",
        group: Group::Fence,
        guards: "I3: an accepted write raises the floor to its token",
        killer: &["F1"],
        question: "栅栏只比较、不推进：SET max_token = max_token。F1 结束时 fence_floor 是多少？",
    },
    Mutation {
        name: "fence-ignores-scope",
        group: Group::Fence,
        guards: "a write raises only its own scope's floor",
        killer: &["F7"],
        question: "栅栏的 UPDATE 不再限定作用域。F7 里没人写的 weekly-report，它的 fence_floor 会变成多少？",
    },
    Mutation {
        name: "fence-commits-before-write",
        group: Group::Fence,
        guards: "compare, advance and write are one transaction under the floor row lock",
        killer: &["F6"],
        question: "推进 floor 之后先提交，再在新事务里写数据。F6(b) 里 A 停在 gap 钩子上（这时它的第二个事务已写了数据、还没提交），其他会话读到的 floor 是几？B 的写入还会排队吗，排在哪把锁上？",
    },
    Mutation {
        name: "resource-ignores-idle-timeout",
        group: Group::Fence,
        guards: "the resource's sessions end a transaction left idle for a ttl: a stalled holder cannot hold the floor row lock forever",
        killer: &["F11"],
        question: "资源会话的 idle_in_transaction_session_timeout 没有被设置。F11 后半段里 A 停在栅栏事务里，B 的写入会怎样？",
    },
    Mutation {
        name: "cte-fence-accepts-any-token",
        group: Group::Fence,
        guards: "I3 in the one-statement form: the fence CTE refuses a token below the floor",
        killer: &["F4", "--mode", "fenced-scope-cte"],
        question: "一条语句写法里 fence 的比较换成了永远成立的条件。F4 里暂停的 A 恢复后用 token=1 写入，结果如何？",
    },
    Mutation {
        name: "cte-fence-never-advances",
        group: Group::Fence,
        guards: "an accepted one-statement write raises the floor, so a writer queued behind it re-evaluates against the new token",
        killer: &["F6", "--mode", "fenced-scope-cte"],
        question: "一条语句写法里 fence 只比较、不推进：SET max_token = max_token。F6(b) 的顺序 B→A 里，A 排在 B 后面，B 提交后 A 重新求值，看到的 floor 是多少？",
    },
    Mutation {
        name: "cte-fence-ignores-scope",
        group: Group::Fence,
        guards: "a one-statement write raises only its own scope's floor",
        killer: &["F7", "--mode", "fenced-scope-cte"],
        question: "一条语句写法里 fence 的 UPDATE 不再限定作用域。F7 里没人写的 weekly-report，它的 fence_floor 会变成多少？",
    },
    Mutation {
        name: "cte-writes-without-fence",
        group: Group::Fence,
        guards: "the upsert takes its row FROM fence: no data write unless the floor row was updated",
        killer: &["F7", "--mode", "fenced-scope-cte"],
        question: "part 不再从 fence 取行，改成无条件的 VALUES。F7 里 A 用 token=1 写 B 尚未触及的 detail，写入返回什么？detail 里有什么？",
    },
    Mutation {
        name: "cte-records-refusal-as-accepted",
        group: Group::Fence,
        guards: "the audit row records what the fence decided: a refusal as accepted=false",
        killer: &["F4", "--mode", "fenced-scope-cte"],
        question: "审计行的 accepted 不再取自 fence，写死成 true。F4 里 A 的写入被拒之后，write_attempt 里怎么记它？",
    },
    Mutation {
        name: "shared-fence-accepts-any-token",
        group: Group::Fence,
        guards: "I3 in the reader/writer form: its one comparison refuses a token below the floor",
        killer: &["F4", "--mode", "fenced-scope-shared"],
        question: "共享锁写法里那一次比较的 max_token = token 换成了 max_token >= token：token 不大于 floor 就写。F4 里暂停的 A 恢复后用 token=1 写入，结果如何？",
    },
    Mutation {
        name: "shared-raise-without-exclusive-lock",
        group: Group::Fence,
        guards: "a raise of the floor holds the scope's advisory lock exclusively, so it waits for every write in flight under the old floor",
        killer: &["F6", "--mode", "fenced-scope-shared"],
        question: "共享锁写法里，推进 floor 的那次调用拿的也是共享锁，而不是排他锁。F6(b) 里 A 以 token=1（等于 floor）写 detail、尚未提交时，B 来把 floor 推进到 2，B 还会等 A 吗？A 的写入最后落在 floor=2 之前还是之后？",
    },
    Mutation {
        name: "shared-raise-ignores-the-floor",
        group: Group::Fence,
        guards: "a raise never lowers the floor: between a writer's two calls another raise may have gone above its token",
        killer: &["F6", "--mode", "fenced-scope-shared"],
        question: "共享锁写法里推进 floor 的 UPDATE 去掉了 max_token < token，改成无条件 SET。A 第一次调用发现 floor=0 低于 token=1，停在两次调用之间；这时 B 把 floor 推进到 2 并提交。A 拿着排他锁再来时，floor 会变成几？",
    },
    Mutation {
        name: "shared-equal-write-without-lock",
        group: Group::Fence,
        guards: "a write under the floor's token holds the scope's advisory lock in share mode: a raise waits for it, and it waits for a raise",
        killer: &["F6", "--mode", "fenced-scope-shared"],
        question: "共享锁写法里，token 等于 floor 的写入不再拿共享锁，只有推进拿排他锁。B 要推进 floor 时，还有什么能让它看出一个同 token 的写入正在途中？",
    },
    Mutation {
        name: "shared-reads-floor-in-the-lock-statement",
        group: Group::Fence,
        guards: "the floor is read by a statement that starts after the lock is granted: a statement's snapshot is taken when it starts, before any wait inside it",
        killer: &["F6", "--mode", "fenced-scope-shared"],
        question: "共享锁写法把“拿锁”和“读 floor”合进了同一条语句，省掉一步。B 把 floor 推进到 2、尚未提交时，A 以 token=1 来写，A 会在锁上等；B 提交后 A 拿到锁，它读到的 floor 是几？",
    },
    Mutation {
        name: "row-fence-accepts-any-token",
        group: Group::Fence,
        guards: "FENCED_ROW refuses a stale token on a row that exists",
        killer: &["F7"],
        question: "逐行栅栏冲突分支上的比较换成了永远成立的条件。F7 里 A 用 token=1 重写已有的 summary，结果如何？",
    },
    Mutation {
        name: "publish-keeps-any-version",
        group: Group::Fence,
        guards: "the downstream keeps the newest source version",
        killer: &["F9"],
        question: "下游按源数据版本取舍的规则被换成了永远成立的条件。先到 B、后到 A 时，下游最后保留谁的内容？",
    },
    Mutation {
        name: "deadline-without-margin",
        group: Group::Client,
        guards: "the local deadline stops margin before the server's expiry",
        killer: &["F1"],
        question: "本地截止时间不再提前 margin：sent + ttl。它比 expires_at 早多少？",
    },
    Mutation {
        name: "deadline-from-response",
        group: Group::Client,
        guards: "the local deadline counts from the send time, not the response",
        killer: &["F2"],
        question: "本地截止时间从收到响应的时刻起算。获取在行锁上排队 600ms 才返回时，本地截止时间和 expires_at 谁先到？",
    },
    Mutation {
        name: "renew-refused-moves-deadline",
        group: Group::Client,
        guards: "only a successful renewal moves the local deadline",
        killer: &["F2"],
        question: "续租被拒时也推迟本地截止时间。过期后那次被拒的续租之后，holder-a 还认为自己在有效期内吗？",
    },
    Mutation {
        name: "renewer-keeps-going",
        group: Group::Client,
        guards: "the renewer stops at its first refusal: the holding is over",
        killer: &["F2"],
        question: "后台续租线程被拒后不退出，继续续租。F2 等它自行停止，会等到吗？",
    },
    Mutation {
        name: "holder-skips-deadline-check",
        group: Group::Client,
        guards: "a holder that finds its local deadline passed does not write",
        killer: &["F4", "--pause-before-check"],
        question: "持有者跳过本地截止时间检查。A 在检查之前被暂停、恢复时租约早已被 B 接手，它还会写吗？栅栏会怎样？",
    },
    Mutation {
        name: "lease-store-commits-locally",
        group: Group::Failover,
        guards: "I2 across a failover: a synchronous lease store's commit returns only once its standby has it",
        killer: &["F14"],
        question: "同步时间线里，租约库的 synchronous_commit 从 remote_apply 改成了 local（synchronous_standby_names 照旧）。备库断开之后，holder-c 的获取还会等它吗？这时切换主备，token 会怎样？",
    },
    Mutation {
        name: "record-omits-floor",
        group: Group::Chaos,
        guards: "every write attempt records the floor it saw (floor_after): without it the checker's floor regressions count nothing, and say zero",
        killer: &["F15"],
        question: "write_attempt 的记录语句不再读 fence_floor，floor_after 一律是 NULL。F15 的检查器还能数出 floor 倒退吗？FENCED_SCOPE 那一行“floor 倒退 0”还说明什么？",
    },
    Mutation {
        name: "checker-blind-to-stale",
        group: Group::Chaos,
        guards: "the checker counts an accepted write below a token its scope had accepted as stale",
        killer: &["F15"],
        question: "检查器数过期写入时，遇到比作用域已接受的 token 更小的被接受写入，不再计数。F15 里 FENCED_SCOPE 的“被接受的过期写入 0”还会是 ok 吗？UNFENCED 那条负向对照呢？",
    },
    Mutation {
        name: "etcd-acquire-without-compare",
        group: Group::Etcd,
        guards: "I1 and I2 on etcd: the acquire txn creates the lock key only if it does not exist (create_revision = 0)",
        killer: &["F16"],
        question: "etcd 上获取用的 txn 去掉了 compare（锁键的 create_revision 必须为 0），put 总是执行。holder-c 持有时 holder-x 来获取，会怎样？它拿到的 token 是多少——put 覆盖一个已存在的键时，create_revision 变不变？",
    },
    Mutation {
        name: "etcd-token-is-lease-id",
        group: Group::Etcd,
        guards: "I2 on etcd: the token is the key's create revision, one counter for the whole cluster; a lease id is unique but not ordered",
        killer: &["F16"],
        question: "etcd 上获取返回的 token 换成了 etcd 租约的 ID（它也独一无二，而且同一个成员发出的一个比一个大）。F16 里 A 拿到的 token 会是多少？换一个成员授予租约，还能保证更大吗？",
    },
    Mutation {
        name: "delay-off-the-wire",
        group: Group::Faults,
        guards: "F12's fault is real: holder A reaches the server only through the delaying proxy, so its write is stale in flight",
        killer: &["F12"],
        question: "F12 启动 A 时忘了调用 `.via_proxy(proxy.port())`：A 的参数里没有指向代理的 `--lease-server` 和 `--resource-server`，它经集群的 Unix 套接字直连服务器，代理照样启动、照样“扣住”。F12 的结论（栅栏拒绝迟到的写入、不设栅栏时它覆盖 B）还站得住吗？哪一行先失败？",
    },
    Mutation {
        name: "clock-fault-not-preloaded",
        group: Group::Faults,
        guards: "F13's fault is real: libfaketime is preloaded into the holder, so its clocks (monotonic included) run slow",
        killer: &["F13"],
        question: "F13 给持有者的环境里只有 FAKETIME=\"+0 x0.6\"，没有 LD_PRELOAD：没有哪个库去读这个变量。x0.9 和 x0.6 两段各会打印什么？",
    },
    Mutation {
        name: "partition-not-applied",
        group: Group::Faults,
        guards: "the partition is real: the switch's nft table drops the frames between the cut hosts (F17–F19, the chaos run)",
        killer: &["F17"],
        question: "交换机收到的 nft 脚本只加一条放行一切的新链、一条 drop 规则也没有：分区“做了”，网络却照常。F17 里 A 的续租还到得了租约库吗？哪一行先失败？",
    },
    Mutation {
        name: "standby-left-connected",
        group: Group::Faults,
        guards: "F18's partition lies between the sites: the standby is on the far side, so its replication stream is cut with the rest",
        killer: &["F18"],
        question: "F18 的分区漏掉了 lease-s：它不在任何一侧，两边都连得上它。备库还会收到 A 在主库上的那次获取吗？holder-a 连 lease-s 会是什么结果？",
    },
    Mutation {
        name: "follower-isolated-instead",
        group: Group::Faults,
        guards: "F19 cuts the leader into the minority: holder-a's only member must be on its side of the partition",
        killer: &["F19"],
        question: "F19 把一个 follower（而不是 leader）和 holder-a 放在少数派一侧，旧 leader 留在多数派里。A 的客户端只认识旧 leader，它还连得上吗？这还是“leader 被隔进少数派”吗？",
    },
    Mutation {
        name: "nemesis-cuts-nothing",
        group: Group::Faults,
        guards: "the chaos run's partitions are real: the nemesis cuts the switch, and confirms each cut before it counts it",
        killer: &["F15"],
        question: "混沌运行的 nemesis 只记下“分区”，却不去动交换机。故障计划里的分区照样“注入”了吗？F15 会在哪里发现？",
    },
    Mutation {
        name: "model-blind-to-stale",
        group: Group::Model,
        guards: "the model's I3 fails on a state where a write took effect below a token that already had: blind, the model calls the broken modes safe",
        killer: &["model"],
        question: "模型的 I3 不再看状态里的过期写入，条件永远成立。`./run.sh model` 的表里，UNFENCED、FENCED_ROW、CHECK_THEN_WRITE 会被判成什么？判定行里哪几行会失败？异步备库上的几行呢？",
    },
    Mutation {
        name: "queue-heartbeat-by-name",
        group: Group::Queue,
        guards: "the queue finds a heartbeat's claim by its token, not by the worker's name a restarted worker reuses (Z1)",
        killer: &["F20"],
        question: "心跳改回按 worker 的名字找认领。F20 里修好之后的那一段，重启前的 worker-1#1 恢复后心跳，结果如何？它接下来会做什么？",
    },
    Mutation {
        name: "queue-heartbeat-ignores-claim",
        group: Group::Queue,
        guards: "a heartbeat extends only the claim that holds the job now (Z2)",
        killer: &["F21"],
        question: "心跳的条件里去掉了 `claim = $2`。F21 里修好之后的那一段，A 恢复后的心跳会怎样？它接下来做的事里，哪些还会被拒绝？",
    },
    Mutation {
        name: "queue-complete-ignores-claim",
        group: Group::Queue,
        guards: "a completion is accepted only from the claim that holds the job now (Z4)",
        killer: &["F23"],
        question: "完成的条件里去掉了 `claim = $2`。F23 里修好之后的那一段，过期的 A 直接完成作业，结果如何？",
    },
    Mutation {
        name: "queue-rescue-select-then-update",
        group: Group::Queue,
        guards: "the rescuer takes a claim back in one statement that judges the row it updates (Z3)",
        killer: &["F22"],
        question: "救援者改回先 SELECT 过期的作业、再按 id UPDATE。F22 里修好之后的那一段，A 在两步之间完成了作业，之后会发生什么？",
    },
    Mutation {
        name: "queue-rescue-gives-token-back",
        group: Group::Queue,
        guards: "a rescue leaves the claim's token where it is, so the next claim's is larger (Z5)",
        killer: &["F24"],
        question: "救援时把 `claim` 减一（把这次尝试还回去）。F24 里修好之后的那一段，B 认领到的 token 是多少？资源端还拦得住 A 吗？",
    },
    Mutation {
        name: "queue-rescue-ignores-heartbeats",
        group: Group::Queue,
        guards: "the rescuer judges the lease the heartbeats extend, not when the claim began (Z6)",
        killer: &["F25"],
        question: "救援的条件从 `locked_until < now()` 换成了 `started_at < now()`。F25 里修好之后的那一段，一直在心跳的 A 的作业会怎样？",
    },
    Mutation {
        name: "queue-rescue-by-app-clock",
        group: Group::Queue,
        guards: "the rescuer judges the lease by the database's clock, in the statement (Z7)",
        killer: &["F26"],
        question: "修好的救援者也改用应用自己的时钟判断过期。F26 里修好之后的那一段，那只快了两个 ttl 的时钟会让什么发生？",
    },
    Mutation {
        name: "queue-heartbeat-shares-work-connection",
        group: Group::Queue,
        guards: "the heartbeat has a connection of its own, not the one the job's work holds (Z8)",
        killer: &["F27"],
        question: "修好之后的 worker 也让心跳和工作共用一个连接。F27 里修好之后的那一段，工作卡在等锁的语句里超过一个 ttl 时，A 的租约会怎样？",
    },
    Mutation {
        name: "queue-release-ignores-lease",
        group: Group::Queue,
        guards: "the pruner releases only the jobs whose own lease ran out (Z9)",
        killer: &["F28"],
        question: "清理者释放作业时不再看作业自己的 `locked_until`。F28 里修好之后的那一段，登记表说 worker-1 死了，它仍在心跳的作业会怎样？",
    },
    Mutation {
        name: "object-if-version-ignored",
        group: Group::Object,
        guards: "a write conditional on the version is refused once the object's version moved on (F29)",
        killer: &["F29"],
        question: "按版本的条件写入去掉了 `AND version = $4`，成了无条件的写入。F29 里 B 先写了一次之后，A 的写入结果如何？先认领的那一段呢？",
    },
    Mutation {
        name: "object-version-not-bumped",
        group: Group::Object,
        guards: "every write moves the object's version on, so a version is never seen twice (F29)",
        killer: &["F29"],
        question: "写入不再把 `version` 加一。F29 先认领的那一段，B 的认领之后，A 读到的 version 还对得上吗？A 的写入会怎样？",
    },
    Mutation {
        name: "object-if-match-ignored",
        group: Group::Object,
        guards: "a write conditional on the ETag is refused once the body changed (F30)",
        killer: &["F30"],
        question: "If-Match 的写入去掉了 `AND etag = $4`。F30 先认领的那一段，A 的 If-Match 会怎样？天真的那一段呢，有什么不同？",
    },
    Mutation {
        name: "object-claim-without-token",
        group: Group::Object,
        guards: "a claim-first holder writes its token into the body, so no body, and no ETag, comes back after another holder's claim (F30)",
        killer: &["F30"],
        question: "先认领时不再把 token 写进 body，只写原来的内容。F30 先认领（按 ETag）的那一段，B 把状态改回 idle 之后，ETag 回到了谁看到的那个？A 的 If-Match 会怎样？F29 按版本的那一段受影响吗？",
    },
    Mutation {
        name: "lock-delay-not-waited",
        group: Group::Object,
        guards: "on a resource that checks nothing, the new holder waits the lock-delay after its grant before its first write (F31)",
        killer: &["F31"],
        question: "等 lock-delay 的那一步不再等：数据库一问就说已经等够了。F31 第一段里，A 的停顿在原本的 lock-delay 之内结束，对象里最后是谁的结果？哪一行会发现 B 没有等？",
    },
    Mutation {
        name: "object-put-checks-then-writes",
        group: Group::Object,
        guards: "the reference store compares and writes in one statement, so of several conditional writes on one version exactly one succeeds (F32)",
        killer: &["F32"],
        question: "原子的存储改成先单独查一次版本、再无条件写入。F32 的探针里，它会放过几个写入者？哪一行会失败？F29 那种一个一个来的写入会受影响吗？",
    },
    Mutation {
        name: "unknown-outcome-not-read-back",
        group: Group::Object,
        guards: "after a write whose answer was lost, the holder reads back and finds its own write (its token and sequence number) before it retries (F33)",
        killer: &["F33"],
        question: "结果不确定之后读回对象的那一步，不管看到什么都说“不是我的”。F33 带标识的那一段，A 接下来会做什么？计数最后是多少？A 以为自己写成了没有？",
    },
    Mutation {
        name: "claim-first-ignores-newer-claim",
        group: Group::Object,
        guards: "a CLAIM_FIRST holder that finds a larger token's claim in the report object gives up before any put (F34)",
        killer: &["F34"],
        question: "认领前读到对象里已有更大的 token 时，不再放弃。F34 第二段先认领的那一次，A 的认领输给 B 之后重读，接下来会做什么？detail 会落到谁手里？",
    },
    Mutation {
        name: "claim-first-claims-unconditionally",
        group: Group::Object,
        guards: "a claim is a put conditional on the version the holder read, so a write in between refuses it (F34)",
        killer: &["F34"],
        question: "认领写入去掉了 `AND version = $3`。F34 第二段里，A 读完对象停住，B 认领并写了 summary；A 醒来后的认领会怎样？它的 detail 呢？",
    },
    Mutation {
        name: "claim-first-rereads-before-write",
        group: Group::Object,
        guards: "after its claim a CLAIM_FIRST holder puts conditional on the version its own last write made and never reads again, so another holder's claim refuses it (F34)",
        killer: &["F34"],
        question: "认领之后，每次写之前再读一次版本，以读到的版本为条件写。F34 第一段里，B 认领并写了 summary 之后，A 写 detail 会怎样？这和 VERSION_CAS 还有什么区别？",
    },
];

/// The mutation called `name`.
pub fn find(name: &str) -> Option<&'static Mutation> {
    MUTATIONS.iter().find(|m| m.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every patch still applies to the current code: a change that moves a
    /// guard must move its mutation with it (checked without writing).
    #[test]
    fn every_patch_applies_to_the_current_code() {
        for m in MUTATIONS {
            let out = std::process::Command::new("git")
                .args(["apply", "--check"])
                .arg(harness::patch_path(m))
                .current_dir(crate::paths::root())
                .output()
                .expect("git");
            assert!(out.status.success(), "mutants/{}.patch no longer applies: {}", m.name, String::from_utf8_lossy(&out.stderr));
        }
    }

    /// Names are unique and each has its patch file.
    #[test]
    fn every_mutation_has_one_patch() {
        let mut names: Vec<&str> = MUTATIONS.iter().map(|m| m.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), MUTATIONS.len(), "duplicate mutation names");
        for m in MUTATIONS {
            assert!(harness::patch_path(m).is_file(), "{} has no patch file", m.name);
        }
    }
}
