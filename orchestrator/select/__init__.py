"""Choosing skills for a goal: retrieval over the library, explicit invocation, the planner's shortlist."""
