//! Replica placement (SPEC section 3 and 4) as pure functions.
