//! lockstep facade
