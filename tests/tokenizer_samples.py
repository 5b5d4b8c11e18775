"""A varied set of strings on which our tokenizers must match the industry ones id for id."""

SAMPLES = {
    "english prose": "The quick brown fox jumps over the lazy dog. It wasn't, however, very quick at all!",
    "shakespeare": (
        "O, that this too too solid flesh would melt,\nThaw and resolve itself into a dew!\n"
        "Or that the Everlasting had not fix'd\nHis canon 'gainst self-slaughter!"
    ),
    "python code": (
        "def scaled(q, k):\n    # dot products over sqrt(d)\n    return (q @ k.T) / math.sqrt(q.shape[-1])\n\n"
        "if __name__ == '__main__':\n\tprint(scaled(x, y), {'a': [1, 2, 3]})\n"
    ),
    "whitespace runs": "a  b   c\t\td\n\n\ne \t \n  f      \n\n\n\n    g\r\nh ",
    "contractions": "I'm sure you'll see they've said it's theirs; we'd've known. DON'T SHOUT. She'S",
    "numbers": "In 2024 it cost $1,234.56 (about 3.14159e3 or 0x1F); call 555-0199 at 12:30, 1st of 10000000.",
    "emoji": "Great job 👍🏽! 🎉🎉 Family: 👨‍👩‍👧‍👦, flags: 🇫🇷🇯🇵, heart ❤️ and 🤖.",
    "cjk and arabic": "東京は日本の首都です。我爱自然语言处理。서울은 한국의 수도입니다. مرحبا بالعالم، كيف حالك؟",
    "accents and symbols": "Café naïve résumé — “quoted” ‘text’ … São Paulo, Zürich, Ørsted, ½ ≤ π ≈ 3.14 ©",
    "end of text": "First document.<|endoftext|>Second document, with <|endoftext|><|endoftext|> twice.",
    "control characters": "tab\there\x00null\x07bell\u200bzero-width\u00adsoft-hyphen\ufeffbom",
    "empty": "",
}
