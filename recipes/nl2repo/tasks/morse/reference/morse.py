"""International Morse code for A-Z and 0-9."""

CODES = {
    "A": ".-", "B": "-...", "C": "-.-.", "D": "-..", "E": ".", "F": "..-.", "G": "--.", "H": "....",
    "I": "..", "J": ".---", "K": "-.-", "L": ".-..", "M": "--", "N": "-.", "O": "---", "P": ".--.",
    "Q": "--.-", "R": ".-.", "S": "...", "T": "-", "U": "..-", "V": "...-", "W": ".--", "X": "-..-",
    "Y": "-.--", "Z": "--..", "0": "-----", "1": ".----", "2": "..---", "3": "...--", "4": "....-",
    "5": ".....", "6": "-....", "7": "--...", "8": "---..", "9": "----.",
}
_BACK = {code: ch for ch, code in CODES.items()}


def encode(text):
    words = []
    for word in text.upper().split():
        letters = []
        for ch in word:
            if ch not in CODES:
                raise ValueError(f"no Morse code for {ch!r}")
            letters.append(CODES[ch])
        words.append(" ".join(letters))
    return " / ".join(words)


def decode(code):
    words = []
    for word in code.split(" / "):
        letters = []
        for symbol in word.split():
            if symbol not in _BACK:
                raise ValueError(f"unknown Morse symbol {symbol!r}")
            letters.append(_BACK[symbol])
        words.append("".join(letters))
    return " ".join(words)
