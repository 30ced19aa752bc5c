//! One slot as the run and the nemesis hold it: its holder name, its link
//! to the server, its [`SlotView`], the sender of its orders, and the
//! handle of its thread.

use super::orders::{Order, SlotView};
use super::plan::SlotPlan;
use super::record::{FaultLog, Tally};
use super::slot_thread::SlotThread;
use crate::error::{panic_message, Result};
use crate::fault::DelayProxy;
use crate::hosts::Network;
use std::sync::atomic::AtomicBool;
use parking_lot::Mutex;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Instant;

/// One slot: its link, its view, its thread.
pub struct Slot {
    /// The holder's name, e.g. `holder-a`.
    pub name: String,
    /// Its link to the server.
    pub link: DelayProxy,
    /// What its thread shows the nemesis.
    view: Arc<Mutex<SlotView>>,
    /// Where the nemesis's orders go.
    orders: mpsc::Sender<Order>,
    /// The thread; `None` once joined.
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Where the thread's breakdown goes, a panic included.
    tally: Arc<Tally>,
}

/// The holder names of the slots: `holder-a` … `holder-z`.
pub fn holder_name(index: usize) -> String {
    format!("holder-{}", (b'a' + index as u8) as char)
}

/// The most slots: one letter each.
pub const MAX_HOLDERS: usize = 26;

/// How many holder slots a chaos run has unless `--holders` says otherwise.
pub const DEFAULT_HOLDERS: u16 = 8;

/// The host of the run's network where the server's address is: each
/// slot's link listens there, and forwards to the server.
pub const SERVER_HOST: &str = "db";

impl Slot {
    /// Starts slot `index`: its link, and its thread, which starts its
    /// first holder at once.
    pub(super) fn start(index: usize, plan: &SlotPlan, net: &Network, stop: &Arc<AtomicBool>, log: &Arc<FaultLog>, tally: &Arc<Tally>, start: Instant) -> Result<Slot> {
        let name = holder_name(index);
        // The link listens on the server's host; the slot's holders, on a
        // host of their own, reach it across the switch.
        let server_host = net.host(SERVER_HOST);
        let link = DelayProxy::start_on(plan.server.clone(), server_host)?;
        let view = Arc::new(Mutex::new(SlotView::default()));
        let (orders, inbox) = mpsc::channel();
        let worker = SlotThread {
            index,
            name: name.clone(),
            plan: plan.clone(),
            link: server_host.at(link.port()),
            host: net.host(&name).clone(),
            view: Arc::clone(&view),
            inbox,
            stop: Arc::clone(stop),
            log: Arc::clone(log),
            tally: Arc::clone(tally),
            start,
            token: Default::default(),
        };
        let thread_name = format!("slot {name}");
        let recorder = Arc::clone(tally);
        let thread = std::thread::Builder::new().name(thread_name.clone()).spawn(move || recorder.catching(&thread_name, || worker.run()))?;
        Ok(Slot { name, link, view, orders, thread: Mutex::new(Some(thread)), tally: Arc::clone(tally) })
    }

    /// What the slot's thread shows right now.
    pub fn view(&self) -> SlotView {
        *self.view.lock()
    }

    /// Sends an order; the slot takes no other until it has carried it out.
    pub fn order(&self, order: Order, log: &FaultLog) {
        self.view.lock().busy = true;
        // A send fails only once the thread has ended (the run is ending):
        // the fault then finds no target, and the log says so.
        if let Err(unsent) = self.orders.send(order) {
            self.view.lock().busy = false;
            log.missed(super::orders::order_event(&unsent.0));
        }
    }

    /// Waits for the slot's thread, which ends once the run's stop flag is
    /// set: its holder resumed, killed and reaped. The thread records its
    /// own panic ([`Tally::catching`]); one that escapes that is recorded here.
    pub(super) fn join(&self) {
        let thread = self.thread.lock().take();
        if let Some(Err(panic)) = thread.map(JoinHandle::join) {
            self.tally.broken.lock().get_or_insert(format!("slot {}'s thread panicked: {}", self.name, panic_message(&*panic)));
        }
    }
}
