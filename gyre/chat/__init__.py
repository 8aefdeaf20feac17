"""Chat templates, tool-call parsing and token-exact incremental prompt building (no I/O)."""

from gyre.chat.history import CallNode, PromptBuilder, PromptPlan, assistant_mismatch
from gyre.chat.messages import Conversation, Message, Tool, ToolCall, tools_key
from gyre.chat.parser import ParsedCall, ParsedOutput, parse_output
from gyre.chat.roles import AGENT_HEADER, AgentClassifier, AgentHeaderError, AgentTag
from gyre.chat.template import ChatFormatError, ChatTemplate
from gyre.chat.tokens import TokenSeq

__all__ = [
    "AGENT_HEADER",
    "AgentClassifier",
    "AgentHeaderError",
    "AgentTag",
    "CallNode",
    "ChatFormatError",
    "ChatTemplate",
    "Conversation",
    "Message",
    "ParsedCall",
    "ParsedOutput",
    "PromptBuilder",
    "PromptPlan",
    "Tool",
    "TokenSeq",
    "ToolCall",
    "assistant_mismatch",
    "parse_output",
    "tools_key",
]
