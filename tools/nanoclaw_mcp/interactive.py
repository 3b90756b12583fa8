"""(being written)"""

TOOLS = []
