//! A session's bounded event stream (ARCHITECTURE.md invariant 8).
//!
//! One-shot watches already bound what a session can be owed (one event per watch), but a
//! client that stops reading its events while it keeps registering watches on many nodes
//! could still make the store hold an ever-growing queue. Here the queue holds at most
//! `capacity` watch events. One more and the session is overrun: the queued events are
//! dropped, the backend ends the session as expired, and the client sees
//! `Event::Session(Expired)`: it must re-sync from the store on a new session, exactly as
//! after any expiry (Kafka's brokers and controller do). Session-state events (few, and the
//! last one ends the stream) are always queued, within a small slack.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use crate::Event;

/// Watch events a session may have waiting before it is overrun.
pub(crate) const EVENT_QUEUE_CAPACITY: usize = 65_536;
/// Room for session-state events beyond the capacity.
const SESSION_EVENT_SLACK: usize = 64;

/// Creates a queue of at most `capacity` watch events.
pub(crate) fn channel(capacity: usize) -> (EventSender, EventReceiver) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            sender_gone: false,
            receiver_gone: false,
            overrun: false,
        }),
        notify: Notify::new(),
        capacity,
    });
    (
        EventSender {
            shared: Arc::clone(&shared),
        },
        EventReceiver { shared },
    )
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    notify: Notify,
    capacity: usize,
}

#[derive(Debug)]
struct State {
    queue: VecDeque<Event>,
    sender_gone: bool,
    receiver_gone: bool,
    /// The receiver fell behind: nothing but session events is queued any more.
    overrun: bool,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every change is one push, pop or flag: a poisoned queue is still whole.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What happened to a sent event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    Queued,
    /// Nobody reads the stream any more.
    Gone,
    /// The receiver fell behind: the queue was cleared; the caller must end the session as
    /// expired.
    Overrun,
}

/// The backend's end of a session's stream. Dropping it ends the stream after what is queued.
#[derive(Debug)]
pub(crate) struct EventSender {
    shared: Arc<Shared>,
}

impl EventSender {
    pub(crate) fn send(&self, event: Event) -> Sent {
        let mut state = self.shared.lock();
        if state.receiver_gone {
            return Sent::Gone;
        }
        let session_event = matches!(event, Event::Session(_));
        if state.overrun && !session_event {
            return Sent::Queued;
        }
        let limit = if session_event {
            self.shared.capacity + SESSION_EVENT_SLACK
        } else {
            self.shared.capacity
        };
        if state.queue.len() >= limit {
            state.queue.clear();
            state.overrun = true;
            if session_event {
                state.queue.push_back(event);
            }
            drop(state);
            self.shared.notify.notify_one();
            return Sent::Overrun;
        }
        state.queue.push_back(event);
        drop(state);
        self.shared.notify.notify_one();
        Sent::Queued
    }
}

impl Drop for EventSender {
    fn drop(&mut self) {
        self.shared.lock().sender_gone = true;
        self.shared.notify.notify_one();
    }
}

/// The client's end (inside [`crate::Events`]).
#[derive(Debug)]
pub(crate) struct EventReceiver {
    shared: Arc<Shared>,
}

impl EventReceiver {
    pub(crate) async fn recv(&mut self) -> Option<Event> {
        loop {
            {
                let mut state = self.shared.lock();
                if let Some(event) = state.queue.pop_front() {
                    return Some(event);
                }
                if state.sender_gone {
                    return None;
                }
            }
            // A notification sent between the check and here is kept as a permit.
            self.shared.notify.notified().await;
        }
    }

    pub(crate) fn try_recv(&mut self) -> Option<Event> {
        self.shared.lock().queue.pop_front()
    }
}

impl Drop for EventReceiver {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.receiver_gone = true;
        state.queue.clear();
    }
}
