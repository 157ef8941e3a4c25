"""The board from chat: Slack, Discord and Telegram commands from verified senders, answered
in the thread that asked (``docs/chat.md``)."""
