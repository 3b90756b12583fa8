"""Slack mrkdwn to safe HTML (calvin/chat/mrkdwn.py): a table of cases as Slack reads them, and
properties over any text: only the renderer's own tags and attributes, only safe links, and text
that comes back as it went in."""

from html.parser import HTMLParser

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from calvin.chat.mrkdwn import ALLOWED_ATTRIBUTES, ALLOWED_TAGS, mentioned_users, mrkdwn_html, safe_href

LINK = 'rel="noopener noreferrer"'
NAMES = {"U1": "Alice", "UBOT": "Calvin"}

CASES = [
    # emphasis
    ("*bold*", "<p><strong>bold</strong></p>"),
    ("_italic_", "<p><em>italic</em></p>"),
    ("~strike~", "<p><del>strike</del></p>"),
    ("a *b* _c_ ~d~.", "<p>a <strong>b</strong> <em>c</em> <del>d</del>.</p>"),
    ("*_both_*", "<p><strong><em>both</em></strong></p>"),
    ("_a *b* c_", "<p><em>a <strong>b</strong> c</em></p>"),
    ("(*in brackets*)", "<p>(<strong>in brackets</strong>)</p>"),
    # unmatched and not-markers stay themselves
    ("*unmatched", "<p>*unmatched</p>"),
    ("2*3*4", "<p>2*3*4</p>"),
    ("snake_case_name and __init__.py", "<p>snake_case_name and __init__.py</p>"),
    ("* not bold *", "<ul><li>not bold *</li></ul>"),
    ("a * b * c", "<p>a * b * c</p>"),
    ("**double**", "<p>**double**</p>"),
    ("*a _b* c_", "<p><strong>a _b</strong> c_</p>"),
    ("*two\nlines*", "<p>*two<br>lines*</p>"),
    # code
    ("`*not bold* <@U1>`", "<p><code>*not bold* &lt;@U1&gt;</code></p>"),
    ("```\n*x* <http://a.example|b> _y_\n```", "<pre>*x* &lt;http://a.example|b&gt; _y_</pre>"),
    ("before ```a\nb``` after", "<p>before </p><pre>a\nb</pre><p> after</p>"),
    ("```never closed", "<p>```never closed</p>"),
    ("```\n&lt;tag&gt; &amp;amp;\n```", "<pre>&lt;tag&gt; &amp;amp;</pre>"),
    # quotes
    ("> quoted\n> more\nafter", "<blockquote><p>quoted<br>more</p></blockquote><p>after</p>"),
    ("&gt; as Slack encodes it", "<blockquote><p>as Slack encodes it</p></blockquote>"),
    (">>> all\nof the rest", "<blockquote><p>all<br>of the rest</p></blockquote>"),
    ("> - a list\n> - in a quote", "<blockquote><ul><li>a list</li><li>in a quote</li></ul></blockquote>"),
    # lists
    ("• one\n• *two*", "<ul><li>one</li><li><strong>two</strong></li></ul>"),
    ("- one\n- two\ntext", "<ul><li>one</li><li>two</li></ul><p>text</p>"),
    ("1. first\n2. second", "<ol><li>first</li><li>second</li></ol>"),
    ("3. not a list start", "<p>3. not a list start</p>"),
    ("-5 degrees", "<p>-5 degrees</p>"),
    # links
    ("<https://a.example/x|the label>", f'<p><a href="https://a.example/x" {LINK}>the label</a></p>'),
    ("<https://a.example/x>", f'<p><a href="https://a.example/x" {LINK}>https://a.example/x</a></p>'),
    ("<mailto:a@b.example|mail me>", f'<p><a href="mailto:a@b.example" {LINK}>mail me</a></p>'),
    ("<https://a.example/?a=1&amp;b=2|q>", f'<p><a href="https://a.example/?a=1&amp;b=2" {LINK}>q</a></p>'),
    ("<javascript:alert(1)|click>", "<p>&lt;javascript:alert(1)|click&gt;</p>"),
    ("<JavaScript:alert(1)>", "<p>&lt;JavaScript:alert(1)&gt;</p>"),
    ("<data:text/html,x|x>", "<p>&lt;data:text/html,x|x&gt;</p>"),
    (  # a quote cannot end the href: the link is refused, and its URL up to the quote linked as a bare one
        '<https://a.example/"onmouseover="x|y>',
        f'<p>&lt;<a href="https://a.example/" {LINK}>https://a.example/</a>&quot;onmouseover=&quot;x|y&gt;</p>',
    ),
    ("*see <https://a.example|this>*", f'<p><strong>see <a href="https://a.example" {LINK}>this</a></strong></p>'),
    # bare URLs
    (
        "go to https://a.example/a_b_c.",
        f'<p>go to <a href="https://a.example/a_b_c" {LINK}>https://a.example/a_b_c</a>.</p>',
    ),
    (
        "(see https://a.example/wiki/X_(y))",
        f'<p>(see <a href="https://a.example/wiki/X_(y)" {LINK}>https://a.example/wiki/X_(y)</a>)</p>',
    ),
    ("*https://a.example*", f'<p><strong><a href="https://a.example" {LINK}>https://a.example</a></strong></p>'),
    ("javascript:alert(1)", "<p>javascript:alert(1)</p>"),
    # mentions
    ("<@U1> and <@U2>", '<p><span class="mention">@Alice</span> and <span class="mention">@U2</span></p>'),
    ("<@U3|bob>", '<p><span class="mention">@bob</span></p>'),
    ("<#C1|general> <#C2>", '<p><span class="mention">#general</span> <span class="mention">#C2</span></p>'),
    ("<!here> <!channel>", '<p><span class="mention">@here</span> <span class="mention">@channel</span></p>'),
    ("<!subteam^S1|@devs>", '<p><span class="mention">@devs</span></p>'),
    ("<!date^1392734382^{date}|Feb 18, 2014>", "<p>Feb 18, 2014</p>"),
    # escaping: Slack's &amp; &lt; &gt; decoded once, then everything escaped
    ("<script>alert(1)</script>", "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"),
    ("&lt;script&gt;", "<p>&lt;script&gt;</p>"),
    ("&amp;lt;b&amp;gt;", "<p>&amp;lt;b&amp;gt;</p>"),
    ('Tom &amp; Jerry\'s "show"', "<p>Tom &amp; Jerry&#x27;s &quot;show&quot;</p>"),
    ("&nbsp; &#60;", "<p>&amp;nbsp; &amp;#60;</p>"),
    ("'\"><img src=x onerror=alert(1)>", "<p>&#x27;&quot;&gt;&lt;img src=x onerror=alert(1)&gt;</p>"),
    ("a < b > c", "<p>a &lt; b &gt; c</p>"),
    # paragraphs
    ("one\ntwo\n\nthree", "<p>one<br>two</p><p>three</p>"),
    ("", ""),
]


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[c[0][:40] or "empty" for c in CASES])
def test_mrkdwn_as_slack_reads_it(text, expected):
    assert mrkdwn_html(text, NAMES) == expected


def test_inline_text_has_no_paragraph_but_blocks_stay():
    assert mrkdwn_html("*yes*", inline=True) == "<strong>yes</strong>"
    assert mrkdwn_html("a\n\nb", inline=True) == "a<br>b"
    assert mrkdwn_html("```x```", inline=True) == "<pre>x</pre>"


def test_mentioned_users_are_the_ids_to_look_up():
    assert mentioned_users("hi <@U1>, <@W2|x> and <#C3> `<@U4>`") == {"U1", "W2", "U4"}
    assert mentioned_users("no one") == set()


@pytest.mark.parametrize(
    ("url", "safe"),
    [
        ("https://a.example", True),
        ("HTTP://a.example/x", True),
        ("mailto:a@b.example", True),
        ("http:/a.example", False),
        ("https://", False),
        ("javascript:alert(1)", False),
        (" javascript:alert(1)", False),
        ("java\tscript:alert(1)", False),
        ("vbscript:x", False),
        ("//a.example", False),
        ("https://a.example/\x00", False),
    ],
)
def test_only_http_https_and_mailto_links(url, safe):
    assert (safe_href(url) is not None) is safe


def test_long_hostile_lines_render_in_linear_time():
    """Unbounded backtracking or a rescan per marker would take minutes here, not milliseconds."""
    for text in ("<" * 40_000, "*a " * 13_000, "`" * 40_000, "_*~" * 13_000, "<a " * 13_000):
        assert len(mrkdwn_html(text)) >= len(text)


# ---------------------------------------------------------------- properties


class _Walk(HTMLParser):
    """Every tag and attribute of the output, and its text as a reader sees it."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.attributes, self.hrefs, self.text = [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attributes.extend(name for name, _ in attrs)
        self.hrefs.extend(value for name, value in attrs if name == "href")
        if tag == "br":
            self.text.append("\n")

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)

    def handle_data(self, data):
        self.text.append(data)


def walk(rendered: str) -> _Walk:
    parser = _Walk()
    parser.feed(rendered)
    parser.close()
    return parser


# Text with Slack's markup characters in plenty, HTML-ish pieces and URL schemes among them.
PIECES = st.sampled_from(
    [
        "*", "_", "~", "`", "```", "<", ">", "|", "&", "&amp;", "&lt;", "&gt;", "\n", " ", "> ", "• ", "1. ",
        "<script>", "</script>", "<img src=x onerror=alert(1)>", "javascript:", "https://", "http://a.example/",
        "mailto:", "<@U1>", "<#C1|x>", "<!here>", '"', "'", "onclick=", "=", "a", "b", "é", "\u202e",
    ]
)  # fmt: skip
MARKUP_TEXT = st.lists(st.one_of(PIECES, st.text(max_size=5)), max_size=40).map("".join)


@settings(max_examples=400, deadline=None)
@given(MARKUP_TEXT)
def test_only_the_renderers_own_tags_attributes_and_safe_links(text):
    found = walk(mrkdwn_html(text, NAMES))
    assert set(found.tags) <= ALLOWED_TAGS
    assert set(found.attributes) <= ALLOWED_ATTRIBUTES
    assert not any(name.startswith("on") for name in found.attributes)
    for href in found.hrefs:
        assert href.split(":", 1)[0].lower() in ("http", "https", "mailto")


@settings(max_examples=400, deadline=None)
@given(MARKUP_TEXT)
def test_no_script_ever_becomes_markup(text):
    rendered = mrkdwn_html(text, NAMES).lower()
    assert "<script" not in rendered and "<img" not in rendered


# Plain text: no markup characters at all, and not starting like a list or a quote.
PLAIN = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="*_~`<>&•"), max_size=60
).filter(lambda t: t.strip() and not t.lstrip().startswith(("-", "1.", "1)", "◦", "▪")))


@settings(max_examples=300, deadline=None)
@given(PLAIN)
def test_plain_text_comes_back_as_it_went_in(text):
    assert "".join(walk(mrkdwn_html(text)).text) == text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=60).filter(str.strip))
@example("<script>alert(1)</script> &amp; &lt;b&gt; <https://a.example|x>")
def test_slack_encoded_text_is_decoded_exactly_once(text):
    """What Slack sends (& < > as entities) reads as what was typed, a `<script>` or a `&amp;` included.

    Any text at all, once its markup characters are quoted the way Slack quotes them: the only
    markup left is emphasis, lists and quotes, so compare with those characters left out."""
    if any(c in text for c in "*_~`•\n") or text.lstrip().startswith(("-", "1.", "1)", "◦", "▪", ">")):
        return
    encoded = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert "".join(walk(mrkdwn_html(encoded)).text) == text
    assert set(walk(mrkdwn_html(encoded)).tags) <= {"p", "a"}  # a bare URL may be a link; nothing else
