"""A prefix tree."""


class Trie:
    def __init__(self):
        self._root = {}
        self._size = 0

    def insert(self, word):
        node = self._root
        for ch in word:
            node = node.setdefault(ch, {})
        if "$" not in node:
            node["$"] = True
            self._size += 1

    def _find(self, prefix):
        node = self._root
        for ch in prefix:
            if ch not in node:
                return None
            node = node[ch]
        return node

    def contains(self, word):
        node = self._find(word)
        return node is not None and "$" in node

    __contains__ = contains

    def starts_with(self, prefix):
        node = self._find(prefix)
        found = []

        def walk(current, path):
            for key, child in current.items():
                if key == "$":
                    found.append(path)
                else:
                    walk(child, path + key)

        if node is not None:
            walk(node, prefix)
        return sorted(found)

    def remove(self, word):
        node = self._find(word)
        if node is None or "$" not in node:
            return False
        del node["$"]
        self._size -= 1
        return True

    def __len__(self):
        return self._size

    def longest_common_prefix(self):
        words = self.starts_with("")
        if not words:
            return ""
        prefix = words[0]
        for word in words[1:]:
            while not word.startswith(prefix):
                prefix = prefix[:-1]
        return prefix
