"""Pure domain: statuses, the transition table, event kinds, value rules, errors."""
