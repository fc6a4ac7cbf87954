"""Pure analysis of kernel source. Plain data in, plain data out; no protocol types, no processes, no asyncio."""

from .analyze import analyze_source, check_launch_sites, check_source, local_lookup
from .model import FileAnalysis, LaunchSite, NkiKernel, Problem, Severity, Span, TritonKernel
from .rules import RULES, Rule

__all__ = [
    "analyze_source", "check_launch_sites", "check_source", "local_lookup", "FileAnalysis", "LaunchSite",
    "NkiKernel", "Problem", "Severity", "Span", "TritonKernel", "RULES", "Rule",
]
